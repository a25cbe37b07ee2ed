// report.json: every field of the ComparisonResult, for tools.
//
//   {"schema": "parity-report", "schema_version": 1, "verdict", "headline", "parity_version",
//    "generated_at",
//    "runs": {"a": {...}, "b": {...}},            every field of RunSummary
//    "tolerances": {"loss": {...}, "tensor": {...}},
//    "checks": [{"id", "title", "status", "summary", "figures": [{"name", "value", "unit"}],
//                "first_failing_step" (null when none), "details", "tensors": [...]}],
//    "diagnoses": [{"pitfall", "title", "evidence", "fix"}],
//    "series": {"steps", "loss_a", "loss_b", "loss_abs_diff", "loss_tolerance",
//               "grad_norm_ratio", "replica_spread_a", "replica_spread_b"},
//    "seeds": [...],                               a comparison over seeds
//    "speed": {"throughput_ratio", "low", "high", "confidence", "threshold", "pairs",
//              "candidate_steps", "baseline_steps", "block_length", "resamples", "verdict"}
//             the gate's throughput interval (null outside the gate)}
//
// Statuses and verdicts are the words of result.h ("pass", "not recorded", "not equivalent").
// JSON has no NaN or infinity, and a diverging run is exactly what a report must keep: a
// non-finite number is written as the string "NaN", "Infinity" or "-Infinity", the convention
// of run directories (common/run_dir/src/run_json.cpp) and of JavaScript and Python's json module.
// Strings are written as given, except that invalid UTF-8 (which JSON cannot carry) is
// replaced; JSON escaping itself is nlohmann's.
#include <cmath>
#include <nlohmann/json.hpp>

#include "escape.h"
#include "parity/reports/reports.h"

namespace parity::reports {
namespace {

using compare::ComparisonResult;
using Json = nlohmann::ordered_json;  // keeps keys in the order written, for people reading

Json number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

Json numbers(const std::vector<double>& values) {
  Json array = Json::array();
  for (double value : values) array.push_back(number(value));
  return array;
}

// Valid UTF-8, which nlohmann requires; control characters stay (JSON escapes them).
Json text(const std::string& value) { return utf8_repair(value); }

Json texts(const std::vector<std::string>& values) {
  Json array = Json::array();
  for (const std::string& value : values) array.push_back(text(value));
  return array;
}

Json run_json(const compare::RunSummary& run) {
  Json versions = Json::object();
  for (const auto& [name, version] : run.versions) versions[utf8_repair(name)] = text(version);
  return {{"label", text(run.label)},
          {"dir", text(run.dir)},
          {"producer", text(run.producer)},
          {"status", text(run.status)},
          {"case_name", text(run.case_name)},
          {"case_hash", text(run.case_hash)},
          {"replicas", run.replicas},
          {"processes", run.processes},
          {"parallel_style", text(run.parallel_style)},
          {"dtype", text(run.dtype)},
          {"optimizer", text(run.optimizer)},
          {"host", text(run.host)},
          {"started_at", text(run.started_at)},
          {"versions", versions},
          {"steps", run.steps},
          {"first_step_seconds", number(run.first_step_seconds)},
          {"step_median_seconds", number(run.step_median_seconds)},
          {"step_spread_seconds", number(run.step_spread_seconds)},
          {"samples_per_second", number(run.samples_per_second)},
          {"peak_bytes_per_replica", run.peak_bytes_per_replica},
          {"memory_method", text(run.memory_method)},
          {"param_bytes_per_replica", run.param_bytes_per_replica},
          {"optimizer_state_bytes_per_replica", run.optimizer_state_bytes_per_replica},
          {"state_layout", text(run.state_layout)}};
}

Json tolerance_json(const compare::Tolerance& tolerance) {
  return {{"rtol", number(tolerance.rtol)},
          {"atol", number(tolerance.atol)},
          {"allowed_bad_steps", tolerance.allowed_bad_steps},
          {"source", text(tolerance.source)}};
}

Json check_json(const compare::Check& check) {
  Json figures = Json::array();
  for (const compare::Figure& figure : check.figures) {
    figures.push_back({{"name", text(figure.name)},
                       {"value", number(figure.value)},
                       {"unit", text(figure.unit)}});
  }
  Json tensors = Json::array();
  for (const compare::TensorDelta& tensor : check.tensors) {
    tensors.push_back({{"step", tensor.step},
                       {"name", text(tensor.name)},
                       {"max_abs", number(tensor.max_abs)},
                       {"rel_l2", number(tensor.rel_l2)},
                       {"cosine", number(tensor.cosine)},
                       {"norm_ratio", number(tensor.norm_ratio)},
                       {"within_tolerance", tensor.within_tolerance},
                       {"gradient_signal", tensor.gradient_signal}});
  }
  return {{"id", text(check.id)},
          {"title", text(check.title)},
          {"status", compare::to_string(check.status)},
          {"summary", text(check.summary)},
          {"figures", figures},
          {"first_failing_step",
           check.first_failing_step ? Json(*check.first_failing_step) : Json(nullptr)},
          {"details", texts(check.details)},
          {"tensors", tensors}};
}

Json series_json(const compare::StepSeries& series) {
  return {{"steps", series.steps},
          {"loss_a", numbers(series.loss_a)},
          {"loss_b", numbers(series.loss_b)},
          {"loss_abs_diff", numbers(series.loss_abs_diff)},
          {"loss_tolerance", numbers(series.loss_tolerance)},
          {"grad_norm_ratio", numbers(series.grad_norm_ratio)},
          {"replica_spread_a", numbers(series.replica_spread_a)},
          {"replica_spread_b", numbers(series.replica_spread_b)}};
}

// A comparison over seeds: each final value per run and the test's interval (the check of id
// "seeds_" + metric holds the test's figures).
Json seed_distributions_json(const std::vector<compare::SeedDistribution>& distributions) {
  Json out = Json::array();
  for (const compare::SeedDistribution& d : distributions) {
    out.push_back({{"metric", text(d.metric)},
                   {"title", text(d.title)},
                   {"seeds_a", texts(d.seeds_a)},
                   {"values_a", numbers(d.values_a)},
                   {"seeds_b", texts(d.seeds_b)},
                   {"values_b", numbers(d.values_b)},
                   {"mean_a", number(d.mean_a)},
                   {"mean_b", number(d.mean_b)},
                   {"margin", number(d.margin)},
                   {"confidence", number(d.confidence)},
                   {"interval_low", number(d.interval_low)},
                   {"interval_high", number(d.interval_high)},
                   {"verdict", text(d.verdict)}});
  }
  return out;
}

// The gate's throughput interval (compare/speed_verdict.h); null outside the gate and when a
// run recorded no per-step times.
Json speed_json(const std::optional<compare::SpeedInterval>& speed) {
  if (!speed) return nullptr;
  return {{"throughput_ratio", number(speed->throughput_ratio)},
          {"low", number(speed->low)},
          {"high", number(speed->high)},
          {"confidence", number(speed->confidence)},
          {"threshold", number(speed->threshold)},
          {"pairs", speed->pairs},
          {"candidate_steps", speed->candidate_steps},
          {"baseline_steps", speed->baseline_steps},
          {"block_length", speed->block_length},
          {"resamples", speed->resamples},
          {"verdict", text(speed->verdict)}};
}

}  // namespace

std::string render_json(const ComparisonResult& result) {
  Json checks = Json::array();
  for (const compare::Check& check : result.checks) checks.push_back(check_json(check));
  Json diagnoses = Json::array();
  for (const compare::Diagnosis& diagnosis : result.diagnoses) {
    diagnoses.push_back({{"pitfall", text(diagnosis.pitfall)},
                         {"title", text(diagnosis.title)},
                         {"evidence", text(diagnosis.evidence)},
                         {"fix", text(diagnosis.fix)}});
  }
  Json report;
  report["schema"] = "parity-report";
  report["schema_version"] = result.schema_version;
  report["verdict"] = compare::to_string(result.verdict);
  report["headline"] = text(result.headline);
  report["parity_version"] = text(result.parity_version);
  report["generated_at"] = text(result.generated_at);
  report["runs"] = {{"a", run_json(result.a)}, {"b", run_json(result.b)}};
  report["tolerances"] = {{"loss", tolerance_json(result.loss_tolerance)},
                          {"tensor", tolerance_json(result.tensor_tolerance)}};
  report["checks"] = checks;
  report["diagnoses"] = diagnoses;
  report["series"] = series_json(result.series);
  report["seeds"] = seed_distributions_json(result.seed_distributions);
  report["speed"] = speed_json(result.speed);
  return report.dump(2) + "\n";
}

}  // namespace parity::reports
