// The gate's throughput interval (compare/speed_verdict.h) on synthetic step times whose answer
// is known by construction: exact scaled copies, constant steps, and the coverage of the
// interval over many draws from a distribution with a known quantile ratio.
#include "parity/compare/speed_verdict.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

#include "test_files.h"

namespace parity::compare {
namespace {

// `pairs` runs of `steps` step times: log step time = log(scale * 1 ms) + a run's level (load
// that came and went between runs, normal with sd `run_sd`) + an AR(1) noise of the steps
// (a busy moment slows several steps in a row: coefficient 0.5, marginal sd `step_sd`). Runs of
// another scale are the same distribution times the ratio of the scales, so each population
// quantile, the one the verdict takes (kStepTimeQuantile) included, is in that ratio.
std::vector<StepTimes> synthetic_runs(std::mt19937_64& random, int pairs, int steps, double scale,
                                      double run_sd = 0.03, double step_sd = 0.1) {
  constexpr double kAutocorrelation = 0.5;
  std::normal_distribution<double> normal(0, 1);
  const double innovation_sd = step_sd * std::sqrt(1 - kAutocorrelation * kAutocorrelation);
  std::vector<StepTimes> runs;
  for (int r = 0; r < pairs; ++r) {
    const double level = run_sd * normal(random);
    double noise = step_sd * normal(random);
    StepTimes run;
    for (int s = 0; s < steps; ++s) {
      run.push_back(scale * 1e-3 * std::exp(level + noise));
      noise = kAutocorrelation * noise + innovation_sd * normal(random);
    }
    runs.push_back(run);
  }
  return runs;
}

std::vector<StepTimes> scaled(std::vector<StepTimes> runs, double factor) {
  for (StepTimes& run : runs) {
    for (double& seconds : run) seconds *= factor;
  }
  return runs;
}

TEST(SpeedVerdict, AnExactlyScaledCopyHasTheScaleAsItsRatioInsideTheInterval) {
  std::mt19937_64 random(1);
  const std::vector<StepTimes> baseline = synthetic_runs(random, 5, 30, 1.0);
  const SpeedInterval slower = judge_speed(baseline, scaled(baseline, 1.1), {});
  // Any quantile of x * 1.1 is that quantile of x times 1.1: the ratio is 1/1.1 up to rounding.
  EXPECT_NEAR(slower.throughput_ratio, 1 / 1.1, 1e-12);
  EXPECT_LE(slower.low, slower.throughput_ratio);
  EXPECT_GE(slower.high, slower.throughput_ratio);
  EXPECT_EQ(slower.pairs, 5);
  EXPECT_EQ(slower.baseline_steps, 150);
  EXPECT_EQ(slower.candidate_steps, 150);
  EXPECT_EQ(slower.block_length, 3);  // round(30^(1/3))

  const SpeedInterval same = judge_speed(baseline, baseline, {});
  EXPECT_EQ(same.throughput_ratio, 1);
  EXPECT_LE(same.low, 1);
  EXPECT_GE(same.high, 1);
}

TEST(SpeedVerdict, ConstantStepsGiveAnIntervalOfOnePointAndACertainVerdict) {
  const std::vector<StepTimes> baseline(3, StepTimes(10, 2e-3));
  const SpeedInterval slower = judge_speed(baseline, scaled(baseline, 1.1), {});
  EXPECT_EQ(slower.low, slower.throughput_ratio);
  EXPECT_EQ(slower.high, slower.throughput_ratio);
  EXPECT_EQ(slower.verdict, "fail");
  const SpeedInterval faster = judge_speed(baseline, scaled(baseline, 0.5), {});
  EXPECT_EQ(faster.low, 2);
  EXPECT_EQ(faster.verdict, "pass");
  // At the threshold exactly: "at or above" passes.
  EXPECT_EQ(judge_speed(baseline, baseline, {1.0}).verdict, "pass");
}

TEST(SpeedVerdict, AnIntervalAcrossTheThresholdIsInconclusive) {
  std::mt19937_64 random(2);
  const std::vector<StepTimes> baseline = synthetic_runs(random, 4, 20, 1.0);
  const std::vector<StepTimes> candidate = synthetic_runs(random, 4, 20, 1.0);
  SpeedTestOptions options;
  options.threshold = judge_speed(baseline, candidate, {}).throughput_ratio;
  const SpeedInterval at_threshold = judge_speed(baseline, candidate, options);
  EXPECT_LT(at_threshold.low, options.threshold);
  EXPECT_GT(at_threshold.high, options.threshold);
  EXPECT_EQ(at_threshold.verdict, "inconclusive");
}

TEST(SpeedVerdict, MorePairsNarrowTheInterval) {
  std::mt19937_64 random(3);
  SpeedTestOptions options;
  options.resamples = 1000;
  // The mean width over 20 draws: one interval's width varies from draw to draw (four runs say
  // little about how much runs differ).
  const auto mean_width = [&](int pairs) {
    double sum = 0;
    for (int draw = 0; draw < 20; ++draw) {
      const SpeedInterval interval = judge_speed(synthetic_runs(random, pairs, 30, 1.0),
                                                 synthetic_runs(random, pairs, 30, 1.1), options);
      sum += interval.high - interval.low;
    }
    return sum / 20;
  };
  // The width falls as 1/sqrt(pairs): a quarter of the pairs, about twice the width.
  const double width_of_4 = mean_width(4);
  const double width_of_16 = mean_width(16);
  EXPECT_GT(width_of_4, 1.6 * width_of_16);
  EXPECT_LT(width_of_4, 2.4 * width_of_16);
}

TEST(SpeedVerdict, TheSameRunsGiveTheSameInterval) {
  std::mt19937_64 random(4);
  const std::vector<StepTimes> baseline = synthetic_runs(random, 3, 25, 1.0);
  const std::vector<StepTimes> candidate = synthetic_runs(random, 3, 25, 1.05);
  const SpeedInterval first = judge_speed(baseline, candidate, {});
  const SpeedInterval second = judge_speed(baseline, candidate, {});
  EXPECT_EQ(first.low, second.low);
  EXPECT_EQ(first.high, second.high);
}

// Coverage: over many draws of runs whose true quantile ratio is 1/1.1, the share of 90%
// intervals that hold it. 300 draws: the standard error of a coverage near 0.9 is
// sqrt(0.9 * 0.1 / 300) = 0.017, so 0.85 lies three below for 6 pairs; 3 pairs, the fewest that
// may fail a candidate (kMinPairsToFail), are held to 0.80. From one pair the interval sees the
// steps' spread but not the 3% by which whole runs differ, and covers far less: the reason one
// pair never fails a candidate.
TEST(SpeedVerdict, NinetyPercentIntervalsHoldTheTrueRatioOnceThereAreEnoughPairs) {
  constexpr int kDraws = 300;
  const double truth = 1 / 1.1;
  SpeedTestOptions options;
  options.confidence = 0.90;
  options.resamples = 1000;
  const auto coverage_of = [&](int pairs) {
    std::mt19937_64 random(5 + static_cast<uint64_t>(pairs));
    int held = 0;
    for (int draw = 0; draw < kDraws; ++draw) {
      const SpeedInterval interval = judge_speed(synthetic_runs(random, pairs, 40, 1.0),
                                                 synthetic_runs(random, pairs, 40, 1.1), options);
      held += interval.low <= truth && truth <= interval.high ? 1 : 0;
    }
    const double coverage = static_cast<double>(held) / kDraws;
    std::cout << fmt::format("coverage of the 90% interval, {} pair(s): {:.3f}\n", pairs, coverage);
    return coverage;
  };
  const double six = coverage_of(6);
  EXPECT_GE(six, 0.85);
  EXPECT_LE(six, 0.99);  // not so wide that it could never fail a slower candidate
  EXPECT_GE(coverage_of(kMinPairsToFail), 0.80);
  EXPECT_LT(coverage_of(1), 0.75);
}

TEST(SpeedVerdict, FewerPairsThanKMinPairsToFailAskForRerunsInsteadOfFailing) {
  const std::vector<StepTimes> baseline(kMinPairsToFail, StepTimes(10, 2e-3));
  const std::vector<StepTimes> slower = scaled(baseline, 1.1);
  EXPECT_EQ(judge_speed(baseline, slower, {}).verdict, "fail");
  const std::vector<StepTimes> one_baseline(baseline.begin(), baseline.end() - 1);
  const std::vector<StepTimes> one_slower(slower.begin(), slower.end() - 1);
  const SpeedInterval too_few = judge_speed(one_baseline, one_slower, {});
  EXPECT_LT(too_few.high, 0.95);
  EXPECT_EQ(too_few.verdict, "inconclusive");
  // Passing needs no more than the interval: an inconclusive gate exits non-zero anyway.
  EXPECT_EQ(judge_speed({baseline.front()}, {baseline.front()}, {}).verdict, "pass");
}

TEST(SpeedVerdict, BadInputIsRefusedWithWhatToFix) {
  const std::vector<StepTimes> two(2, StepTimes(10, 1e-3));
  const std::vector<StepTimes> one(1, StepTimes(10, 1e-3));
  testing::expect_input_error([&] { judge_speed(two, one, {}); },
                              {"as many baseline runs as candidate runs", "got 2 and 1"});
  testing::expect_input_error([&] { judge_speed({}, {}, {}); }, {"at least one"});
  testing::expect_input_error([&] { judge_speed(one, {StepTimes(3, 1e-3)}, {}); },
                              {"at least 4 steady steps", "candidate run 1 has 3"});
  StepTimes negative(10, 1e-3);
  negative[4] = -1;
  testing::expect_input_error([&] { judge_speed({negative}, one, {}); },
                              {"baseline run 1 has a step time of -1 s"});
  SpeedTestOptions certain;
  certain.confidence = 1;
  testing::expect_input_error([&] { judge_speed(one, one, certain); }, {"confidence 1"});
}

TEST(SpeedVerdict, ARunWithoutStepTimesIsNamedWithTheFix) {
  RunDir run;
  run.dir = "runs/imported";
  run.steps.resize(8);
  EXPECT_FALSE(records_step_times(run));
  testing::expect_input_error([&] { steady_step_times(run); },
                              {"runs/imported/metrics.jsonl", "step_seconds"});
  for (size_t i = 0; i < run.steps.size(); ++i) {
    run.steps[i].step_seconds = 1e-3 * static_cast<double>(i + 1);
  }
  EXPECT_TRUE(records_step_times(run));
  const StepTimes steady = steady_step_times(run);
  ASSERT_EQ(steady.size(), 7U);  // the first step, with its warm-up, left out
  EXPECT_EQ(steady.front(), 2e-3);
}

}  // namespace
}  // namespace parity::compare
