// Throughput: an informational check. Speed is what a migration is for, but it depends on the
// machine and its load, so it warns (never fails, unless fail_on_performance) when run A is
// markedly slower than the reference. It compares steady-state samples per second (global batch
// / median step time after the first step); the first step, which holds compilation or warm-up,
// is reported apart. The gate judges throughput by the confidence interval of the ratio of
// step-time 10th percentiles instead (speed_verdict.h: steadier under a neighbour's load than a
// median). Memory is memory_check.cpp's.
#include <fmt/format.h>

#include "case_toml.h"
#include "checks.h"
#include "figures.h"
#include "parity/compare/speed_verdict.h"

namespace parity::compare {
namespace {

bool has_timings(const RunInfo& info) {
  return info.timings.steady_steps > 0 && info.timings.steady_step_median_seconds > 0;
}

std::string describe_timings(const char* label, const RunDir& run) {
  const RunTimings& t = run.info.timings;
  return fmt::format(
      "run {} ({}): steady step median {} ms, interquartile range {} ms over {} steps; first step "
      "{} ms (includes compilation or warm-up); setup {} s",
      label, run.info.producer, format_number(t.steady_step_median_seconds * 1e3),
      format_number(t.steady_step_spread_seconds * 1e3), t.steady_steps,
      format_number(t.first_step_seconds * 1e3), format_number(t.setup_seconds));
}

void add_timing_figures(Check& check, const RunPair& runs) {
  const RunTimings& a = runs.a.info.timings;
  const RunTimings& b = runs.b.info.timings;
  check.figures.push_back({"step_median_seconds_a", a.steady_step_median_seconds, "s"});
  check.figures.push_back({"step_median_seconds_b", b.steady_step_median_seconds, "s"});
  check.figures.push_back({"step_spread_seconds_a", a.steady_step_spread_seconds, "s"});
  check.figures.push_back({"step_spread_seconds_b", b.steady_step_spread_seconds, "s"});
  check.figures.push_back({"first_step_seconds_a", a.first_step_seconds, "s"});
  check.figures.push_back({"first_step_seconds_b", b.first_step_seconds, "s"});
}

// The gate's verdict from the interval (speed_verdict.h); `comparison` says what the two given
// runs measured, which the interval may not include (interleaved reruns judge instead).
Check judge_by_interval(Check check, const std::string& comparison, const SpeedInterval& speed,
                        const CompareOptions& options) {
  check.figures.push_back({"throughput_ratio", speed.throughput_ratio, "x"});
  check.figures.push_back({"throughput_ratio_low", speed.low, "x"});
  check.figures.push_back({"throughput_ratio_high", speed.high, "x"});
  check.figures.push_back({"throughput_confidence", speed.confidence, ""});
  check.figures.push_back({"throughput_threshold", speed.threshold, "x"});
  check.figures.push_back({"speed_pairs", static_cast<double>(speed.pairs), ""});
  check.figures.push_back({"speed_steps_a", static_cast<double>(speed.candidate_steps), ""});
  check.figures.push_back({"speed_steps_b", static_cast<double>(speed.baseline_steps), ""});
  std::string judgement;
  if (speed.verdict == "fail") {
    check.status = warning_status(options);
    judgement = fmt::format("below the {}x {} threshold", format_number(speed.threshold),
                            options.fail_on_performance ? "failure" : "warning");
  } else if (speed.verdict == "pass") {
    check.status = CheckStatus::kPass;
    judgement = fmt::format("at or above the {}x threshold", format_number(speed.threshold));
  } else if (speed.high < speed.threshold) {
    check.status = CheckStatus::kWarn;
    judgement = fmt::format(
        "inconclusive, rerun with more repetitions (below the {}x threshold, but {} pair(s) of "
        "runs cannot tell a slower candidate from a slower moment of the machine: parity gate "
        "--speed-reruns {} or more)",
        format_number(speed.threshold), speed.pairs, kMinPairsToFail);
  } else {
    check.status = CheckStatus::kWarn;
    judgement = fmt::format(
        "inconclusive, rerun with more repetitions (it straddles the {}x threshold: parity gate "
        "--speed-reruns N)",
        format_number(speed.threshold));
  }
  // The verdict within the terminal summary's line: ratio, interval, judgement first.
  check.summary = fmt::format(
      "A/B throughput {}x, {}% interval [{}, {}]: {}; the ratio of the step times' {}% "
      "quantiles over {} pair(s) of runs ({} and {} steady steps).",
      format_number(speed.throughput_ratio), format_number(speed.confidence * 100),
      format_number(speed.low), format_number(speed.high), judgement,
      format_number(kStepTimeQuantile * 100), speed.pairs,
      speed.candidate_steps, speed.baseline_steps);
  check.details.push_back(fmt::format("the given runs: {}", comparison));
  if (speed.pairs == 1) {
    check.details.push_back(
        "one pair of runs: how much whole runs differ (load that came and went between them) is "
        "not measured, only the spread of their steps; interleaved reruns (parity gate "
        "--speed-reruns N) measure it");
  }
  check.details.push_back(fmt::format(
      "interval: percentile bootstrap, {} resamples, drawing whole pairs of runs, then blocks "
      "of {} consecutive steps within each run (compare/speed_verdict.h)",
      speed.resamples, speed.block_length));
  return check;
}

}  // namespace

CheckStatus warning_status(const CompareOptions& options) {
  return options.fail_on_performance ? CheckStatus::kFail : CheckStatus::kWarn;
}

std::optional<double> samples_per_second(const RunDir& run) {
  const std::optional<int64_t> batch = global_batch(run);
  if (!batch || !has_timings(run.info)) return std::nullopt;
  return static_cast<double>(*batch) / run.info.timings.steady_step_median_seconds;
}

std::optional<SpeedInterval> judge_speed_of(const RunPair& runs, const CompareOptions& options) {
  if (!options.speed) return std::nullopt;
  SpeedTestOptions test;
  test.threshold = options.throughput_warn_ratio;
  test.confidence = options.speed->confidence;
  if (options.speed->a.empty() && options.speed->b.empty()) {
    if (!records_step_times(runs.a) || !records_step_times(runs.b)) return std::nullopt;
    return judge_speed({steady_step_times(runs.b)}, {steady_step_times(runs.a)}, test);
  }
  return judge_speed(options.speed->b, options.speed->a, test);
}

Check check_throughput(const RunPair& runs, const CompareOptions& options,
                       const std::optional<SpeedInterval>& speed) {
  Check check;
  check.id = "throughput";
  check.title = "Throughput";
  const RunInfo& a = runs.a.info;
  const RunInfo& b = runs.b.info;
  if (!speed && (!has_timings(a) || !has_timings(b))) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = fmt::format(
        "Run {} has no steady-state step timings (producers write them when the run ends).",
        !has_timings(a) ? "A" : "B");
    return check;
  }
  check.details = {describe_timings("A", runs.a), describe_timings("B", runs.b)};
  const std::optional<double> rate_a = samples_per_second(runs.a);
  const std::optional<double> rate_b = samples_per_second(runs.b);
  double ratio = 0;
  std::string comparison;
  if (rate_a && rate_b) {
    ratio = *rate_a / *rate_b;
    check.figures = {{"samples_per_second_a", *rate_a, "samples/s"},
                     {"samples_per_second_b", *rate_b, "samples/s"}};
    comparison =
        fmt::format("A trains {} samples/s, B {}", format_number(*rate_a), format_number(*rate_b));
  } else {
    // Without the global batch only step times compare, which is the same ratio when both
    // runs train the same batch (the case check says whether they do).
    ratio = b.timings.steady_step_median_seconds / a.timings.steady_step_median_seconds;
    comparison = "global batch unknown, so step times are compared";
  }
  if (speed) {
    check = judge_by_interval(std::move(check), comparison, *speed, options);
    add_timing_figures(check, runs);
    return check;
  }
  check.figures.push_back({"throughput_ratio", ratio, "x"});
  add_timing_figures(check, runs);

  const bool slow = ratio < options.throughput_warn_ratio;
  check.status = slow ? warning_status(options) : CheckStatus::kPass;
  check.summary =
      fmt::format("{}: A/B throughput {}x{} (steady step median {} ms vs {} ms).", comparison,
                  format_number(ratio),
                  slow ? fmt::format(", below the {}x {} threshold", options.throughput_warn_ratio,
                                     options.fail_on_performance ? "failure" : "warning")
                       : "",
                  format_number(a.timings.steady_step_median_seconds * 1e3),
                  format_number(b.timings.steady_step_median_seconds * 1e3));
  return check;
}

}  // namespace parity::compare
