// The gate's throughput verdict on a noisy machine. One timing of each run cannot tell a slower
// candidate from a busy machine (a rerun made right after its own baseline here measured 15%
// slower), so speed is judged from runs of baseline and candidate made alternately, A B, B A ...
// (both halves of a pair see the same machine), by the ratio of a low quantile of the step
// times (kStepTimeQuantile, the 10th percentile) and its confidence interval:
//
//   throughput ratio = q10(baseline step times) / q10(candidate step times)
//
// Why not the median: load only ever adds time, and a neighbour's load does not slow every step
// alike. On this 2-core machine, with another process spinning on one core, 64x64 matrix
// products took 0.41 ms a step idle and then came in two modes, about 0.74 ms and about 1.4 ms,
// the slow one holding anywhere from none to all of a run's steps (tests/compare/
// speed_gate_load_test.cpp). A median then falls in whichever mode holds half the steps, and
// its ratio between identical candidates ranged from 0.91 to 1.05 over 40 to 160 pairs; the fast
// end of the distribution is what the code costs when the machine lets it run, and a 10th
// percentile estimates it steadily (the minimum would too, but one lucky step moves it, and a
// bootstrap of an extreme is not consistent). This is the reasoning of BenchmarkTools.jl's
// estimator (J. Chen and J. Revels, "Robust benchmarking in noisy environments", 2016, which
// takes the minimum). A step that is slower in every run, as a slower kernel is, moves the
// whole distribution and so the quantile.
//
// over every steady step (each run's first step, which holds warm-up or compilation, is left
// out) of all runs of a side pooled. The interval is a percentile bootstrap in two stages: whole
// interleaved pairs are drawn with replacement (the runs' differences from one another: load that
// came and went), then, within each drawn run, blocks of consecutive steps (a run's step times
// are autocorrelated: a busy second slows several steps in a row, so single steps drawn
// independently would understate the spread). Drawing with replacement at both stages counts
// the within-run spread twice, which offsets the bootstrap's underestimate from few pairs.
// Measured coverage of a 90% interval (tests/compare/speed_verdict_test.cpp: steps with AR(1)
// noise of coefficient 0.5, runs whose levels differ by 3%): 0.92 over 6 pairs, 0.88 over 3,
// 0.73 from one pair, whose runs' difference from each other cannot be measured.
//
// The verdict: "pass" when the whole interval lies at or above the threshold (1 - the largest
// drop allowed), "fail" when it lies below, "inconclusive" when it straddles it (rerun with
// more repetitions: the interval narrows as pairs are added). Below kMinPairsToFail pairs an
// interval below the threshold is "inconclusive" too: too few runs to tell a slower candidate
// from a slower moment of the machine (the failure this verdict exists to prevent), so they ask
// for reruns, never fail; an inconclusive gate still exits non-zero, so nothing slower passes.
//
// Sources: B. Efron and R. J. Tibshirani, An Introduction to the Bootstrap (1993), ch. 13 (the
// percentile interval); A. C. Davison and D. V. Hinkley, Bootstrap Methods and their Application
// (1997), section 3.8 (resampling hierarchical data: clusters, then within them); H. R. Kuensch,
// "The jackknife and the bootstrap for general stationary observations", Annals of Statistics
// 17 (1989) (the moving block bootstrap); P. Hall, J. L. Horowitz and B.-Y. Jing, "On blocking
// rules for the bootstrap with dependent data", Biometrika 82 (1995) (blocks of n^(1/3) steps).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "parity/common/run_dir.h"
#include "parity/compare/result.h"

namespace parity::compare {

// The steady step times (seconds) of one run: every step of metrics.jsonl after the first.
using StepTimes = std::vector<double>;

struct SpeedTestOptions {
  double threshold = 0.95;  // the candidate fails when its throughput ratio lies below this
  double confidence = 0.95;
  int64_t resamples = 4000;
  uint64_t seed = 20261205;  // the bootstrap is deterministic: the same runs, the same interval
};

// The quantile of the pooled steady step times whose ratio is the throughput ratio.
inline constexpr double kStepTimeQuantile = 0.1;
// The fewest steady steps a run needs for a block bootstrap of its quantile.
inline constexpr int64_t kMinSteadySteps = 4;
// The fewest interleaved pairs whose interval may fail a candidate: 3, where the measured
// coverage of a 90% interval reaches 0.85.
inline constexpr int64_t kMinPairsToFail = 3;

// Whether `run` recorded a positive step_seconds at every step of metrics.jsonl and at least
// kMinSteadySteps after the first.
bool records_step_times(const RunDir& run);
// Its steady step times; InputError naming DIR/metrics.jsonl and the fix when
// records_step_times is false.
StepTimes steady_step_times(const RunDir& run);

// The interval and the verdict. baseline_runs[i] and candidate_runs[i] are the i-th interleaved
// pair; InputError when the counts differ, there is no pair, a run has fewer than
// kMinSteadySteps times or one that is not positive and finite, or an option is out of range.
SpeedInterval judge_speed(const std::vector<StepTimes>& baseline_runs,
                          const std::vector<StepTimes>& candidate_runs,
                          const SpeedTestOptions& options);

}  // namespace parity::compare
