#include "parity/compare/speed_verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "parity/common/error.h"
#include "parity/common/step_timing.h"

namespace parity::compare {
namespace {

// The q-quantile of `values` by linear interpolation between order statistics, as
// quantile_of_sorted, found by selection instead of a sort. Reorders `values`.
double quantile_of(std::vector<double>& values, double q) {
  const double position = q * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const auto at_below = values.begin() + static_cast<std::ptrdiff_t>(below);
  std::nth_element(values.begin(), at_below, values.end());
  const double fraction = position - static_cast<double>(below);
  if (fraction == 0) return *at_below;
  const double above = *std::min_element(at_below + 1, values.end());
  return *at_below + fraction * (above - *at_below);
}

double pooled_quantile(const std::vector<StepTimes>& runs) {
  std::vector<double> pooled;
  for (const StepTimes& run : runs) pooled.insert(pooled.end(), run.begin(), run.end());
  return quantile_of(pooled, kStepTimeQuantile);
}

// Hall, Horowitz and Jing's order for the block length of a variance estimate: n^(1/3).
size_t block_length_for(size_t steps) {
  return std::clamp<size_t>(static_cast<size_t>(std::lround(std::cbrt(steps))), 1, steps);
}

// One moving-block resample of `run`, as many steps long, appended to `out`.
void append_block_resample(const StepTimes& run, size_t block, std::mt19937_64& random,
                           std::vector<double>& out) {
  std::uniform_int_distribution<size_t> start_of_block(0, run.size() - block);
  for (size_t drawn = 0; drawn < run.size();) {
    const size_t start = start_of_block(random);
    for (size_t i = 0; i < block && drawn < run.size(); ++i, ++drawn) out.push_back(run[start + i]);
  }
}

void check_runs(const std::vector<StepTimes>& runs, const char* side) {
  for (size_t i = 0; i < runs.size(); ++i) {
    if (static_cast<int64_t>(runs[i].size()) < kMinSteadySteps) {
      throw InputError(fmt::format(
          "the speed verdict needs at least {} steady steps per run; {} run {} has {}: train "
          "more steps",
          kMinSteadySteps, side, i + 1, runs[i].size()));
    }
    for (const double seconds : runs[i]) {
      if (!std::isfinite(seconds) || seconds <= 0) {
        throw InputError(
            fmt::format("{} run {} has a step time of {} s: step times must be positive and finite",
                        side, i + 1, seconds));
      }
    }
  }
}

}  // namespace

bool records_step_times(const RunDir& run) {
  return static_cast<int64_t>(run.steps.size()) > kMinSteadySteps &&
         std::all_of(run.steps.begin(), run.steps.end(), [](const StepMetrics& step) {
           return std::isfinite(step.step_seconds) && step.step_seconds > 0;
         });
}

StepTimes steady_step_times(const RunDir& run) {
  if (!records_step_times(run)) {
    throw InputError(fmt::format(
        "{}: the speed verdict needs a positive step_seconds at every step and at least {} "
        "steps after the first (ddp_ref and pmap_engine record them); log each step's wall "
        "time in your job and import it with parity import metrics --map step_seconds=NAME, "
        "or train more steps",
        (run.dir / "metrics.jsonl").string(), kMinSteadySteps));
  }
  StepTimes times;
  for (size_t i = 1; i < run.steps.size(); ++i) times.push_back(run.steps[i].step_seconds);
  return times;
}

SpeedInterval judge_speed(const std::vector<StepTimes>& baseline_runs,
                          const std::vector<StepTimes>& candidate_runs,
                          const SpeedTestOptions& options) {
  if (baseline_runs.empty() || baseline_runs.size() != candidate_runs.size()) {
    throw InputError(fmt::format(
        "the speed verdict needs interleaved pairs: as many baseline runs as candidate runs, at "
        "least one (got {} and {})",
        baseline_runs.size(), candidate_runs.size()));
  }
  if (!(options.confidence > 0 && options.confidence < 1) || options.resamples < 100 ||
      !std::isfinite(options.threshold)) {
    throw InputError(fmt::format(
        "speed verdict options: confidence {} must lie in (0, 1), resamples {} be at least 100 "
        "and the threshold {} be finite",
        options.confidence, options.resamples, options.threshold));
  }
  check_runs(baseline_runs, "baseline");
  check_runs(candidate_runs, "candidate");

  SpeedInterval interval;
  interval.throughput_ratio = pooled_quantile(baseline_runs) / pooled_quantile(candidate_runs);
  interval.confidence = options.confidence;
  interval.threshold = options.threshold;
  interval.pairs = static_cast<int64_t>(baseline_runs.size());
  interval.resamples = options.resamples;
  size_t shortest_run = baseline_runs.front().size();
  for (const auto* side : {&baseline_runs, &candidate_runs}) {
    for (const StepTimes& run : *side) {
      shortest_run = std::min(shortest_run, run.size());
      (side == &baseline_runs ? interval.baseline_steps : interval.candidate_steps) +=
          static_cast<int64_t>(run.size());
    }
  }
  // One block length for every run, that of the shortest: the blocks must fit each run.
  const size_t block = block_length_for(shortest_run);
  interval.block_length = static_cast<int64_t>(block);

  std::mt19937_64 random(options.seed);
  std::uniform_int_distribution<size_t> pair_of(0, baseline_runs.size() - 1);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(options.resamples));
  std::vector<double> baseline_sample;
  std::vector<double> candidate_sample;
  for (int64_t r = 0; r < options.resamples; ++r) {
    baseline_sample.clear();
    candidate_sample.clear();
    for (size_t drawn = 0; drawn < baseline_runs.size(); ++drawn) {
      const size_t pair = pair_of(random);
      append_block_resample(baseline_runs[pair], block, random, baseline_sample);
      append_block_resample(candidate_runs[pair], block, random, candidate_sample);
    }
    ratios.push_back(quantile_of(baseline_sample, kStepTimeQuantile) /
                     quantile_of(candidate_sample, kStepTimeQuantile));
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1 - options.confidence) / 2;
  interval.low = quantile_of_sorted(ratios, tail);
  interval.high = quantile_of_sorted(ratios, 1 - tail);
  const bool below = interval.high < options.threshold;
  const bool enough_pairs_to_fail = interval.pairs >= kMinPairsToFail;
  interval.verdict = interval.low >= options.threshold ? "pass"
                     : below && enough_pairs_to_fail   ? "fail"
                                                       : "inconclusive";
  return interval;
}

}  // namespace parity::compare
