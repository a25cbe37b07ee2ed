// The oracle: a third run of the same case in higher precision (the engine in f64), closer to the
// exact training trajectory than either f32 run. Two f32 runs may both differ from the truth by
// rounding; what matters is that the run under test is not markedly further from it than the
// reference. Each run's error is its largest loss difference from the oracle over the steps all
// three recorded, and A passes when err_A <= factor * err_B + floor (compare.h).
//
// The floor matters: the two f32 runs need not be equally far from f64. optax computes Adam's
// bias corrections 1 - b^t in f32 (jnp.power of a weak-typed float and an i32 count), torch in
// double (Python floats; std::pow in LibTorch's C++ Adam). Over 10 steps of mlp2-fmnist the
// faithful engine run is 4.4e-6 from the f64 loss, DDP 8.5e-8; with the corrections in double
// the engine is 1.9e-7 from it (measured). 50x DDP's error, and a third of the f32 tolerance.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <cmath>
#include <limits>

#include "checks.h"
#include "figures.h"
#include "rounding_growth.h"
#include "parity/common/error.h"

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

// Bits of mantissa: the order of precision among the dtypes a run may train in.
int precision_bits(const std::string& dtype) {
  if (dtype == "f64") return 53;
  if (dtype == "f32") return 24;
  if (dtype == "f16") return 11;
  if (dtype == "bf16") return 8;
  return 0;
}

// " (2 x 158: BatchNorm statistics summed in f32, sqrt(n); x 108: Adam's bias corrections in
// f32)", or nothing where the frameworks' arithmetic is not known to differ.
std::string growth_text(double factor, const RoundingGrowth& growth) {
  std::string text;
  if (growth.statistics > 1) {
    text += fmt::format(" x {}: BatchNorm's statistics summed in f32, the square root of their "
                        "values",
                        format_number(growth.statistics));
  }
  if (growth.optimizer > 1) {
    text += fmt::format(" x {}: Adam's bias corrections in f32, in f32 roundings",
                        format_number(growth.optimizer));
  }
  return text.empty() ? text : fmt::format(" ({}{})", format_number(factor), text);
}

// The steps of `wanted` that `have` lacks; both sorted.
std::vector<int64_t> steps_missing(const std::vector<int64_t>& wanted,
                                   const std::vector<int64_t>& have) {
  std::vector<int64_t> missing;
  std::set_difference(wanted.begin(), wanted.end(), have.begin(), have.end(),
                      std::back_inserter(missing));
  return missing;
}

}  // namespace

std::optional<std::string> oracle_shortfall(const RunPair& runs, const RunDir& oracle) {
  const std::string where = oracle.dir.string();
  const std::string rerun = "train it again, as long as the runs it judges (parity pmap CASE "
                            "--float64 with their --set overrides)";
  if (oracle.info.status != "complete") {
    return fmt::format("the oracle {} is {}{}; {}", where, oracle.info.status,
                       oracle.info.failure.empty()
                           ? std::string()
                           : fmt::format(" ({})", trim_right(oracle.info.failure)),
                       rerun);
  }
  std::vector<int64_t> compared, oracle_steps;
  for (const StepPair& pair : runs.common) compared.push_back(pair.step());
  for (const StepMetrics& metrics : oracle.steps) oracle_steps.push_back(metrics.step);
  if (const std::vector<int64_t> missing = steps_missing(compared, oracle_steps);
      !missing.empty()) {
    return fmt::format("the oracle {} lacks {} of the {} steps the runs recorded (steps {}); {}",
                       where, missing.size(), compared.size(), format_steps(missing), rerun);
  }
  std::vector<int64_t> recorded_by_both;
  std::set_intersection(runs.a.tensor_steps.begin(), runs.a.tensor_steps.end(),
                        runs.b.tensor_steps.begin(), runs.b.tensor_steps.end(),
                        std::back_inserter(recorded_by_both));
  if (const std::vector<int64_t> missing = steps_missing(recorded_by_both, oracle.tensor_steps);
      !missing.empty()) {
    return fmt::format("the oracle {} lacks the tensors both runs recorded at step(s) {} (no {}); "
                       "{}",
                       where, format_steps(missing),
                       step_tensors_path(oracle.dir, missing.front()).filename().string(), rerun);
  }
  return std::nullopt;
}

Check refused_oracle_check(const std::string& why) {
  Check check;
  check.id = "oracle";
  check.title = "Oracle";
  check.status = CheckStatus::kNotRecorded;
  check.summary = fmt::format("Oracle refused: {}.", why);
  return check;
}

Check check_oracle(const RunPair& runs, const CompareOptions& options,
                   const Tolerance& dtype_tolerance, const RoundingGrowth& growth,
                   const std::optional<TensorOracleJudgement>& tensors) {
  Check check;
  check.id = "oracle";
  check.title = "Oracle";
  check.status = CheckStatus::kNotRecorded;
  if (options.oracle == nullptr) {
    check.summary = "Oracle not requested (no higher-precision run given).";
    return check;
  }
  const RunInfo& oracle_info = options.oracle->info;
  // An oracle no more precise than the runs judged would call their own rounding the truth.
  const int compared_bits =
      std::max(precision_bits(runs.a.info.dtype), precision_bits(runs.b.info.dtype));
  if (precision_bits(oracle_info.dtype) <= compared_bits) {
    throw InputError(fmt::format(
        "{}: the oracle trained in {}, no more precise than the runs it would judge ({} and {}); "
        "an oracle must be a higher-precision run: train one with parity pmap CASE --float64",
        (options.oracle->dir / "run.json").string(), oracle_info.dtype, runs.a.info.dtype,
        runs.b.info.dtype));
  }
  // The oracle stands for what the reference computes, done in higher precision.
  if (oracle_info.case_hash != runs.b.info.case_hash) {
    throw InputError(fmt::format(
        "{}: the oracle trained case {} (hash {}), the reference (run B) case {} (hash {}); "
        "train the oracle from B's case and overrides: parity pmap CASE --set ... --float64",
        (options.oracle->dir / "run.json").string(), oracle_info.case_name, oracle_info.case_hash,
        runs.b.info.case_name, runs.b.info.case_hash));
  }
  double error_a = 0;
  double error_b = 0;
  double largest_loss = 0;
  int64_t steps = 0;
  for (const StepPair& pair : runs.common) {
    const StepMetrics* oracle = find_step(*options.oracle, pair.step());
    if (oracle == nullptr) continue;
    ++steps;
    largest_loss = std::max(largest_loss, std::abs(oracle->loss));
    error_a = worse_error(error_a, pair.a->loss, oracle->loss);
    error_b = worse_error(error_b, pair.b->loss, oracle->loss);
  }
  if (steps == 0) {
    check.summary = fmt::format("The oracle run {} shares no step with both runs.",
                                options.oracle->dir.string());
    return check;
  }
  const double floor =
      options.oracle_floor.value_or(dtype_tolerance.atol + dtype_tolerance.rtol * largest_loss);
  // Where the frameworks' arithmetic differs by design, A's rounding may be larger by that much
  // (rounding_growth.h), and the factor with it.
  const double factor = options.oracle_factor * growth.total();
  const double allowed = factor * error_b + floor;
  check.figures = {{"steps_compared", static_cast<double>(steps), ""},
                   {"max_loss_error_a", error_a, ""},
                   {"max_loss_error_b", error_b, ""},
                   {"floor", floor, ""},
                   {"allowed_error_a", allowed, ""}};
  if (growth.statistics > 1) {
    check.figures.push_back({"statistics_rounding_growth", growth.statistics, "x"});
  }
  if (growth.optimizer > 1) {
    check.figures.push_back({"optimizer_rounding_growth", growth.optimizer, "x"});
  }
  const bool losses_pass = error_a <= allowed;  // false for NaN
  const bool tensors_pass = !tensors || tensors->beyond.empty();
  check.status = losses_pass && tensors_pass ? CheckStatus::kPass : CheckStatus::kFail;
  check.summary = fmt::format(
      "Largest loss error against the oracle ({} {}, {} steps): A {}, B {}; A may reach {} x B + "
      "{} = {}{}.",
      oracle_info.producer, oracle_info.dtype, steps, format_number(error_a),
      format_number(error_b), format_number(factor), format_number(floor),
      format_number(allowed), growth_text(options.oracle_factor, growth));
  if (tensors && tensors->judged > 0) {
    check.figures.push_back({"tensors_judged", static_cast<double>(tensors->judged), ""});
    check.figures.push_back(
        {"groups_beyond_oracle_band", static_cast<double>(tensors->beyond.size()), ""});
    check.summary += fmt::format(
        " Recorded tensors ({} judged): at {} of {} group-steps A's worst tensor is further from "
        "the oracle than {} x B's worst (times a small tensor's sampling spread).",
        tensors->judged, tensors->beyond.size(), tensors->groups,
        format_number(factor));
    if (tensors->without_signal > 0) {
      check.figures.push_back(
          {"tensors_without_gradient_signal", static_cast<double>(tensors->without_signal), ""});
      check.summary += fmt::format(
          " {} tensors of parameters without gradient signal (see Gradients) are left out.",
          tensors->without_signal);
    }
    check.details = tensors->beyond;
    if (!tensors->past_horizon.empty()) {
      check.figures.push_back(
          {"groups_past_horizon", static_cast<double>(tensors->past_horizon.size()), ""});
      check.summary += fmt::format(
          " {} group-steps past the predictability horizon (B itself {} or more from the "
          "oracle) are left to the loss.",
          tensors->past_horizon.size(), format_number(kTensorOracleHorizon));
      check.details.insert(check.details.end(), tensors->past_horizon.begin(),
                           tensors->past_horizon.end());
    }
  }
  return check;
}

}  // namespace parity::compare
