// compare_runs: lines the two runs up, runs every check, diagnoses, and states the verdict and
// the one-sentence headline.
#include "parity/compare/compare.h"

#include <fmt/format.h>

#include <algorithm>

#include "checks.h"
#include "default_rules.h"
#include "figures.h"
#include "parity/common/error.h"
#include "parity/compare/tolerance.h"
#include "tensor_scan.h"

namespace parity::compare {
namespace {

Tolerance dtype_tolerance(const RunDir& run) {
  std::optional<Tolerance> tolerance = assert_close_tolerance(run.info.dtype);
  if (!tolerance) {
    throw InputError(
        fmt::format("{}: key \"dtype\": unknown dtype \"{}\"; expected f32, bf16, "
                    "f16 or f64",
                    (run.dir / "run.json").string(), run.info.dtype));
  }
  return *tolerance;
}

// Replaces the defaults with what the caller set, saying so in `source`.
Tolerance apply_overrides(Tolerance tolerance, const std::optional<double>& rtol,
                          const std::optional<double>& atol) {
  if (!rtol && !atol) return tolerance;
  const std::string defaults = tolerance.source;
  tolerance.rtol = rtol.value_or(tolerance.rtol);
  tolerance.atol = atol.value_or(tolerance.atol);
  tolerance.source = fmt::format("given: rtol {}, atol {} (defaults: {})", tolerance.rtol,
                                 tolerance.atol, defaults);
  return tolerance;
}

// The runs' compute dtype sets the loss tolerance: the less precise run's (tolerance.h).
Tolerance loss_tolerance(const RunPair& runs, const CompareOptions& options) {
  Tolerance tolerance = apply_overrides(looser_of(dtype_tolerance(runs.a), dtype_tolerance(runs.b)),
                                        options.loss_rtol, options.loss_atol);
  tolerance.allowed_bad_steps = options.allowed_bad_steps.value_or(
      default_allowed_bad_steps(static_cast<int64_t>(runs.common.size())));
  return tolerance;
}

// Tensors get the measured defaults, loosened to assert_close's for a less precise dtype.
Tolerance tensor_tolerance(const RunPair& runs, const CompareOptions& options) {
  const Tolerance by_dtype = looser_of(dtype_tolerance(runs.a), dtype_tolerance(runs.b));
  return apply_overrides(looser_of(default_tensor_tolerance(), by_dtype), options.tensor_rtol,
                         options.tensor_atol);
}

// "run A is incomplete (step 3: ...)", one clause per run that did not finish, and the refused
// oracle's.
std::string incomplete_note(const RunPair& runs, const std::optional<std::string>& oracle_refused) {
  std::vector<std::string> notes;
  for (const auto& [label, run] : {std::pair{"A", &runs.a}, std::pair{"B", &runs.b}}) {
    const RunInfo& info = run->info;
    if (info.status == "complete") continue;
    notes.push_back(info.failure.empty() ? fmt::format("run {} is {}", label, info.status)
                                         : fmt::format("run {} is {} ({})", label, info.status,
                                                       trim_right(info.failure)));
  }
  if (oracle_refused) notes.push_back("oracle refused: " + *oracle_refused);
  return fmt::format("{}", fmt::join(notes, "; "));
}

std::string likely_cause(const std::vector<Diagnosis>& diagnoses) {
  if (diagnoses.empty()) return "no known pitfall matched; see the failed checks";
  return fmt::format("likely {} ({})", diagnoses.front().title, diagnoses.front().pitfall);
}

std::string make_headline(const ComparisonResult& result, const RunPair& runs, bool float_noise,
                          const std::optional<std::string>& oracle_refused) {
  std::optional<int64_t> first_step;
  std::vector<std::string> failed_titles;
  for (const Check& check : result.checks) {
    if (check.status != CheckStatus::kFail) continue;
    failed_titles.push_back(check.title);
    if (check.first_failing_step && (!first_step || *check.first_failing_step < *first_step))
      first_step = check.first_failing_step;
  }
  const std::string incomplete = incomplete_note(runs, oracle_refused);
  const size_t num_steps = runs.common.size();
  if (failed_titles.empty()) {
    if (!incomplete.empty()) {
      return fmt::format("Incomplete: {}; the {} steps both recorded agree{}.", incomplete,
                         num_steps,
                         result.diagnoses.empty() ? "" : "; " + likely_cause(result.diagnoses));
    }
    if (result.verdict == Verdict::kInconclusive && result.speed) {
      return fmt::format(
          "Inconclusive, rerun with more repetitions: the other checks pass, but throughput is "
          "undecided against the {}x threshold (A/B {}x, {}% interval [{}, {}] over {} "
          "pair(s) of runs; see Throughput).",
          format_number(result.speed->threshold), format_number(result.speed->throughput_ratio),
          format_number(result.speed->confidence * 100), format_number(result.speed->low),
          format_number(result.speed->high), result.speed->pairs);
    }
    if (float_noise) {
      return fmt::format(
          "Equivalent within float noise: A ({}) and B ({}) part beyond the {} tolerance, but A "
          "is no further from the higher-precision oracle than B's rounding allows.",
          runs.a.info.producer, runs.b.info.producer, runs.a.info.dtype);
    }
    return fmt::format("Equivalent: A ({}) and B ({}) agree on all {} steps compared.",
                       runs.a.info.producer, runs.b.info.producer, num_steps);
  }
  const std::string where =
      first_step ? fmt::format("first part at step {}", *first_step) : std::string("differ");
  return fmt::format("A ({}) and B ({}) {} ({} failed): {}{}.", runs.a.info.producer,
                     runs.b.info.producer, where, fmt::join(failed_titles, ", "),
                     likely_cause(result.diagnoses), incomplete.empty() ? "" : "; " + incomplete);
}

// The oracle separates float noise from divergence: when it passed (A is no further from the
// higher-precision trajectory than the reference allows), the runs agreed on the first update
// (or the oracle judged every recorded tensor and found A's as close to it as B's: BatchNorm's
// ill-conditioned gradients differ in f32 from the first step on), and nothing
// but the loss, gradient, parameter and model state tolerances failed, those failures are the
// rounding of two f32 runs, not a difference in what they compute. They become
// warnings and the runs are equivalent. Returns whether it accepted them.
bool accept_float_noise(ComparisonResult& result, const Findings& findings) {
  const auto oracle = std::find_if(result.checks.begin(), result.checks.end(),
                                   [](const Check& c) { return c.id == "oracle"; });
  if (oracle == result.checks.end() || oracle->status != CheckStatus::kPass) return false;
  if (findings.first_non_finite) return false;
  // Judged on losses alone, a different first update is a difference in what the runs compute;
  // the oracle's judgement of every recorded tensor can tell rounding from it.
  if (!findings.oracle_vouches_for_tensors &&
      (findings.first_grads_match == false || findings.first_params_match == false)) {
    return false;
  }
  // Layer outputs part for the same reason: Flax's BatchNorm takes the variance as
  // E[x^2] - E[x]^2 in f32, torch's in two passes accumulated in double, so from the first
  // BatchNorm on the f32 outputs differ by a factor per channel (cnn-fmnist: up to 2e-5).
  const auto within_tolerance_only = [](const Check& check) {
    return check.status != CheckStatus::kFail || check.id == "loss_curve" ||
           check.id == "gradients" || check.id == "parameters" || check.id == "model_state" ||
           check.id == "layer_outputs";
  };
  if (!std::all_of(result.checks.begin(), result.checks.end(), within_tolerance_only)) {
    return false;
  }
  bool accepted = false;
  for (Check& check : result.checks) {
    if (check.status != CheckStatus::kFail) continue;
    check.status = CheckStatus::kWarn;
    check.summary += " Float noise: A is within the oracle's bound (see Oracle).";
    accepted = true;
  }
  // The rounding-drift diagnosis explained those failures; the oracle has now answered it.
  if (accepted) result.diagnoses.clear();
  return accepted;
}

Verdict decide(const ComparisonResult& result, const RunPair& runs, bool oracle_refused) {
  if (runs.a.info.status != "complete" || runs.b.info.status != "complete" || oracle_refused) {
    return Verdict::kIncomplete;
  }
  const bool any_failed =
      std::any_of(result.checks.begin(), result.checks.end(),
                  [](const Check& c) { return c.status == CheckStatus::kFail; });
  if (any_failed) return Verdict::kNotEquivalent;
  // A throughput interval that straddles the gate's threshold can tell neither way.
  if (result.speed && result.speed->verdict == "inconclusive") return Verdict::kInconclusive;
  return Verdict::kEquivalent;
}

}  // namespace

RunSummary summarize_run(const std::string& label, const RunDir& run) {
  const RunInfo& info = run.info;
  RunSummary summary;
  summary.label = label;
  summary.dir = run.dir.string();
  summary.producer = info.producer;
  summary.status = info.status;
  summary.case_name = info.case_name;
  summary.case_hash = info.case_hash;
  summary.replicas = info.replicas;
  summary.processes = info.processes;
  summary.parallel_style = info.parallel_style;
  summary.dtype = info.dtype;
  summary.optimizer = info.optimizer;
  summary.host = info.host;
  summary.started_at = info.started_at;
  summary.versions = info.versions;
  summary.steps = static_cast<int64_t>(run.steps.size());
  summary.first_step_seconds = info.timings.first_step_seconds;
  summary.step_median_seconds = info.timings.steady_step_median_seconds;
  summary.step_spread_seconds = info.timings.steady_step_spread_seconds;
  summary.samples_per_second = samples_per_second(run).value_or(0);
  summary.peak_bytes_per_replica = info.memory.peak_bytes_per_replica;
  summary.memory_method = info.memory.method;
  summary.param_bytes_per_replica = info.memory.param_bytes_per_replica;
  summary.optimizer_state_bytes_per_replica = info.memory.optimizer_state_bytes_per_replica;
  summary.state_layout = info.memory.state_layout;
  summary.results = info.results;
  return summary;
}

namespace {

// The checks' results and the findings they measured, before any diagnosis.
struct Judgement {
  ComparisonResult result;
  Findings findings;
  std::optional<std::string> oracle_refused;  // why the oracle given cannot judge these runs
};

Judgement judge(const RunPair& runs, const CompareOptions& options) {
  const RunDir& a = runs.a;
  const RunDir& b = runs.b;
  Judgement judged;
  ComparisonResult& result = judged.result;
  Findings& findings = judged.findings;
  result.a = summarize_run("A", a);
  result.b = summarize_run("B", b);
  result.loss_tolerance = loss_tolerance(runs, options);
  result.tensor_tolerance = tensor_tolerance(runs, options);
  const TensorScan scan =
      scan_tensors(a, b, result.tensor_tolerance.rtol, result.tensor_tolerance.atol);

  findings.replicas = a.info.replicas;
  // A refused oracle judges nothing: neither the loss nor any tensor.
  if (options.oracle != nullptr) judged.oracle_refused = oracle_shortfall(runs, *options.oracle);
  const RunDir* oracle = judged.oracle_refused ? nullptr : options.oracle;
  std::optional<TensorOracleJudgement> oracle_tensors;
  GradientSignal signal;
  // Read from both runs' cases once, for the loss band and the tensor band alike.
  const RoundingGrowth growth = oracle != nullptr ? rounding_growth(a, b) : RoundingGrowth{};
  if (oracle != nullptr && !oracle->tensor_steps.empty()) {
    signal = find_gradient_signal(*oracle);
    oracle_tensors =
        judge_tensors_against_oracle(a, b, *oracle, result.tensor_tolerance,
                                     options.oracle_factor * growth.total(), signal);
    findings.oracle_vouches_for_tensors =
        oracle_tensors->judged > 0 && oracle_tensors->beyond.empty();
  }
  result.speed = judge_speed_of(runs, options);
  result.checks = {
      check_case(runs, options),
      check_loss_curve(runs, result.loss_tolerance, result.series, findings),
      check_gradients(scan, result.tensor_tolerance, signal, findings),
      check_parameters(scan, result.tensor_tolerance, signal, findings),
      check_replicas(scan, findings),
      check_data(runs, findings),
      check_rng(runs, findings),
      judged.oracle_refused
          ? refused_oracle_check(*judged.oracle_refused)
          : check_oracle(runs, options, looser_of(dtype_tolerance(a), dtype_tolerance(b)), growth,
                         oracle_tensors),
      check_throughput(runs, options, result.speed),
      check_memory(runs, options),
  };
  if (std::optional<Check> state = check_model_state(scan, result.tensor_tolerance, findings)) {
    const auto parameters = std::find_if(result.checks.begin(), result.checks.end(),
                                         [](const Check& c) { return c.id == "parameters"; });
    result.checks.insert(parameters + 1, std::move(*state));
  }
  // After the tensors of the step it explains: the forward of that step's first update.
  if (std::optional<Check> outputs = check_layer_outputs(runs, result.tensor_tolerance, findings)) {
    const auto replicas = std::find_if(result.checks.begin(), result.checks.end(),
                                       [](const Check& c) { return c.id == "replicas"; });
    result.checks.insert(replicas, std::move(*outputs));
  }
  findings.first_non_finite = find_first_non_finite(runs);
  return judged;
}

}  // namespace

ComparisonResult compare_runs(const RunDir& a, const RunDir& b, const CompareOptions& options) {
  const RunPair runs = pair_runs(a, b);
  Judgement judged = judge(runs, options);
  ComparisonResult& result = judged.result;
  result.diagnoses = diagnose(runs, judged.findings);
  const bool float_noise = accept_float_noise(result, judged.findings);
  result.verdict = decide(result, runs, judged.oracle_refused.has_value());
  result.headline = make_headline(result, runs, float_noise, judged.oracle_refused);
  result.parity_version = PARITY_VERSION;
  result.generated_at = utc_timestamp_now();
  return result;
}

std::vector<std::string> matching_default_rules(const RunDir& a, const RunDir& b,
                                                const CompareOptions& options) {
  const RunPair runs = pair_runs(a, b);
  const Judgement judged = judge(runs, options);
  std::vector<std::string> ids;
  for (const DefaultRule rule : default_rules()) {
    if (std::optional<Diagnosis> diagnosis = rule(runs, judged.findings)) {
      ids.push_back(diagnosis->pitfall);
    }
  }
  return ids;
}

ComparisonResult compare_run_dirs(const std::filesystem::path& a, const std::filesystem::path& b,
                                  const CompareOptions& options) {
  return compare_runs(read_run_dir(a), read_run_dir(b), options);
}

}  // namespace parity::compare
