// The oracle: a third run of the same case in higher precision (the engine in f64), closer to the
// exact training trajectory than either f32 run. Two f32 runs may both differ from the truth by
// rounding; what matters is that the run under test is not markedly further from it than the
// reference. Each run's error is its largest loss difference from the oracle over the steps all
// three recorded, and A passes when err_A <= factor * err_B + floor (compare.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "checks.h"
#include "figures.h"

namespace parity::compare {
namespace {

const StepMetrics* find_step(const RunDir& run, int64_t step) {
  const auto found = std::lower_bound(
      run.steps.begin(), run.steps.end(), step,
      [](const StepMetrics& metrics, int64_t wanted) { return metrics.step < wanted; });
  return found != run.steps.end() && found->step == step ? &*found : nullptr;
}

// |x - oracle|, NaN-propagating so a non-finite loss makes the error NaN (and the check fail).
double worse_error(double error, double x, double oracle) {
  const double difference = std::abs(x - oracle);
  return std::isnan(difference) || std::isnan(error) ? std::numeric_limits<double>::quiet_NaN()
                                                     : std::max(error, difference);
}

}  // namespace

Check check_oracle(const RunPair& runs, const CompareOptions& options) {
  Check check;
  check.id = "oracle";
  check.title = "Oracle";
  check.status = CheckStatus::kNotRecorded;
  if (options.oracle == nullptr) {
    check.summary = "Oracle not requested (no higher-precision run given).";
    return check;
  }
  double error_a = 0;
  double error_b = 0;
  int64_t steps = 0;
  for (const StepPair& pair : runs.common) {
    const StepMetrics* oracle = find_step(*options.oracle, pair.step());
    if (oracle == nullptr) continue;
    ++steps;
    error_a = worse_error(error_a, pair.a->loss, oracle->loss);
    error_b = worse_error(error_b, pair.b->loss, oracle->loss);
  }
  if (steps == 0) {
    check.summary = fmt::format("The oracle run {} shares no step with both runs.",
                                options.oracle->dir.string());
    return check;
  }
  const double allowed = options.oracle_factor * error_b + options.oracle_floor;
  check.figures = {{"steps_compared", static_cast<double>(steps), ""},
                   {"max_loss_error_a", error_a, ""},
                   {"max_loss_error_b", error_b, ""},
                   {"allowed_error_a", allowed, ""}};
  const bool pass = error_a <= allowed;  // false for NaN
  check.status = pass ? CheckStatus::kPass : CheckStatus::kFail;
  check.summary = fmt::format(
      "Largest loss error against the oracle ({}, {} steps): A {}, B {}; A may reach {} x B + {} = "
      "{}.",
      options.oracle->info.producer, steps, format_number(error_a), format_number(error_b),
      format_number(options.oracle_factor), format_number(options.oracle_floor),
      format_number(allowed));
  return check;
}

}  // namespace parity::compare
