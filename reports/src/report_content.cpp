#include "report_content.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "number_format.h"

namespace parity::reports {
namespace {

using compare::RunSummary;

std::string step_time(const RunSummary& run) {
  return format_seconds(run.step_median_seconds) + " median, spread " +
         format_seconds(run.step_spread_seconds);
}

std::string peak_memory(const RunSummary& run) {
  if (run.peak_bytes_per_replica.empty()) return "not recorded";
  const int64_t largest =
      *std::max_element(run.peak_bytes_per_replica.begin(), run.peak_bytes_per_replica.end());
  return format_bytes(static_cast<double>(largest)) + " on the largest replica";
}

// What the largest-holding replica keeps between steps: "1.97 MiB (params 672 KiB + optimizer
// state 1.31 MiB)".
std::string held_state(const RunSummary& run) {
  if (run.param_bytes_per_replica.empty()) return "not recorded";
  size_t largest = 0;
  for (size_t r = 1; r < run.param_bytes_per_replica.size(); ++r) {
    if (run.param_bytes_per_replica[r] + run.optimizer_state_bytes_per_replica[r] >
        run.param_bytes_per_replica[largest] + run.optimizer_state_bytes_per_replica[largest]) {
      largest = r;
    }
  }
  const auto params = static_cast<double>(run.param_bytes_per_replica[largest]);
  const auto optimizer = static_cast<double>(run.optimizer_state_bytes_per_replica[largest]);
  return format_bytes(params + optimizer) + " (params " + format_bytes(params) +
         " + optimizer state " + format_bytes(optimizer) + ")";
}

std::string or_not_recorded(const std::string& text) {
  return text.empty() ? "not recorded" : text;
}

}  // namespace

std::vector<RunRow> run_rows(const RunSummary& a, const RunSummary& b) {
  using std::to_string;
  const auto throughput = [](const RunSummary& run) {
    return format_number(run.samples_per_second) + " samples/s";
  };
  return {
      {"directory", a.dir, b.dir},
      {"producer", a.producer, b.producer},
      {"status", a.status, b.status, true},
      {"case", a.case_name, b.case_name, true},
      {"case hash", a.case_hash, b.case_hash, true},
      {"replicas", to_string(a.replicas), to_string(b.replicas), true},
      {"processes", to_string(a.processes), to_string(b.processes)},
      {"parallel style", or_not_recorded(a.parallel_style), or_not_recorded(b.parallel_style)},
      {"dtype", a.dtype, b.dtype, true},
      {"optimizer", a.optimizer, b.optimizer, true},
      {"steps", to_string(a.steps), to_string(b.steps), true},
      {"first step", format_seconds(a.first_step_seconds), format_seconds(b.first_step_seconds)},
      {"step time", step_time(a), step_time(b)},
      {"throughput", throughput(a), throughput(b)},
      {"peak memory", peak_memory(a), peak_memory(b)},
      {"memory measured by", a.memory_method, b.memory_method},
      {"params + optimizer state per replica", held_state(a), held_state(b)},
      {"their layout", or_not_recorded(a.state_layout), or_not_recorded(b.state_layout)},
      {"host", a.host, b.host},
      {"started at", a.started_at, b.started_at},
  };
}

std::vector<RunRow> version_rows(const RunSummary& a, const RunSummary& b) {
  std::set<std::string> names;
  for (const auto* run : {&a, &b}) {
    for (const auto& [name, version] : run->versions) names.insert(name);
  }
  const auto version = [](const RunSummary& run, const std::string& name) {
    const auto found = run.versions.find(name);
    return found == run.versions.end() ? std::string("–") : found->second;
  };
  std::vector<RunRow> rows;
  for (const std::string& name : names) rows.push_back({name, version(a, name), version(b, name)});
  return rows;
}

const std::vector<std::string>& tensor_columns() {
  static const std::vector<std::string> kColumns = {
      "step", "tensor", "max |Δ|", "rel L2", "cosine", "norm ratio", "within tolerance"};
  return kColumns;
}

std::vector<std::string> tensor_cells(const compare::TensorDelta& tensor) {
  return {std::to_string(tensor.step),           tensor.name,
          format_number(tensor.max_abs),         format_number(tensor.rel_l2),
          format_number(tensor.cosine),          format_number(tensor.norm_ratio),
          tensor.within_tolerance ? "yes" : tensor.gradient_signal ? "no" : "no signal"};
}

std::string tolerance_text(const compare::Tolerance& tolerance) {
  return "rtol " + format_number(tolerance.rtol) + ", atol " + format_number(tolerance.atol) +
         ", " + std::to_string(tolerance.allowed_bad_steps) + " steps allowed outside";
}

std::vector<std::pair<compare::CheckStatus, size_t>> status_tally(
    const std::vector<compare::Check>& checks) {
  using compare::CheckStatus;
  std::vector<std::pair<CheckStatus, size_t>> tally;
  for (CheckStatus status :
       {CheckStatus::kFail, CheckStatus::kWarn, CheckStatus::kNotRecorded, CheckStatus::kPass}) {
    const auto count = static_cast<size_t>(std::count_if(
        checks.begin(), checks.end(), [&](const auto& check) { return check.status == status; }));
    if (count > 0) tally.emplace_back(status, count);
  }
  return tally;
}

std::string compared_text(const compare::ComparisonResult& result) {
  if (result.seed_distributions.empty()) {
    return fmt::format("{} steps compared", result.series.steps.size());
  }
  const compare::SeedDistribution& first = result.seed_distributions.front();
  return fmt::format("{} seeds of A and {} of B compared", first.values_a.size(),
                     first.values_b.size());
}

std::vector<std::string> seed_distribution_lines(const compare::ComparisonResult& result) {
  std::vector<std::string> lines;
  for (const compare::SeedDistribution& d : result.seed_distributions) {
    lines.push_back(fmt::format(
        "{}: A {}, B {}, difference {}, {:.0f}% interval [{}, {}], margin ±{}: {}", d.title,
        format_number(d.mean_a), format_number(d.mean_b), format_number(d.mean_a - d.mean_b),
        d.confidence * 100, format_number(d.interval_low), format_number(d.interval_high),
        format_number(d.margin), d.verdict));
  }
  return lines;
}

}  // namespace parity::reports
