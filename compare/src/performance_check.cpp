// Throughput and memory: informational checks. Speed and memory are what a migration is for, but
// they depend on the machine and its load, so they warn (never fail, unless fail_on_performance)
// when run A is markedly slower or larger than the reference. Throughput compares steady-state
// samples per second (global batch / median step time after the first step); the first step,
// which holds compilation or warm-up, is reported apart. Memory compares the largest per-replica
// peak, stating how each producer measured it: the two methods need not count the same bytes.
#include <fmt/format.h>

#include <algorithm>

#include "case_toml.h"
#include "checks.h"
#include "figures.h"

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

// Turns a warning into a failure when the caller gates on performance.
CheckStatus warning_status(const CompareOptions& options) {
  return options.fail_on_performance ? CheckStatus::kFail : CheckStatus::kWarn;
}

int64_t largest_peak(const MemoryReport& memory) {
  return *std::max_element(memory.peak_bytes_per_replica.begin(),
                           memory.peak_bytes_per_replica.end());
}

}  // namespace

std::optional<double> samples_per_second(const RunDir& run) {
  const std::optional<int64_t> batch = global_batch(run);
  if (!batch || !has_timings(run.info)) return std::nullopt;
  return static_cast<double>(*batch) / run.info.timings.steady_step_median_seconds;
}

Check check_throughput(const RunPair& runs, const CompareOptions& options) {
  Check check;
  check.id = "throughput";
  check.title = "Throughput";
  const RunInfo& a = runs.a.info;
  const RunInfo& b = runs.b.info;
  if (!has_timings(a) || !has_timings(b)) {
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
  check.figures.push_back({"throughput_ratio", ratio, "x"});
  check.figures.push_back({"step_median_seconds_a", a.timings.steady_step_median_seconds, "s"});
  check.figures.push_back({"step_median_seconds_b", b.timings.steady_step_median_seconds, "s"});
  check.figures.push_back({"step_spread_seconds_a", a.timings.steady_step_spread_seconds, "s"});
  check.figures.push_back({"step_spread_seconds_b", b.timings.steady_step_spread_seconds, "s"});
  check.figures.push_back({"first_step_seconds_a", a.timings.first_step_seconds, "s"});
  check.figures.push_back({"first_step_seconds_b", b.timings.first_step_seconds, "s"});

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

Check check_memory(const RunPair& runs, const CompareOptions& options) {
  Check check;
  check.id = "memory";
  check.title = "Peak memory";
  const MemoryReport& a = runs.a.info.memory;
  const MemoryReport& b = runs.b.info.memory;
  if (a.peak_bytes_per_replica.empty() || b.peak_bytes_per_replica.empty()) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = fmt::format("Run {} recorded no peak memory per replica.",
                                a.peak_bytes_per_replica.empty() ? "A" : "B");
    return check;
  }
  const auto peak_a = static_cast<double>(largest_peak(a));
  const auto peak_b = static_cast<double>(largest_peak(b));
  const double ratio = ratio_of(peak_a, peak_b);
  check.figures = {{"peak_bytes_a", peak_a, "bytes"},
                   {"peak_bytes_b", peak_b, "bytes"},
                   {"memory_ratio", ratio, "x"}};
  check.details = {
      fmt::format("run A ({}): {}", runs.a.info.producer, a.method),
      fmt::format("run B ({}): {}", runs.b.info.producer, b.method),
      fmt::format("peak bytes per replica, A: {}", fmt::join(a.peak_bytes_per_replica, ", ")),
      fmt::format("peak bytes per replica, B: {}", fmt::join(b.peak_bytes_per_replica, ", ")),
  };
  const bool large = ratio > options.memory_warn_ratio;
  check.status = large ? warning_status(options) : CheckStatus::kPass;
  check.summary = fmt::format(
      "Largest per-replica peak: A {:.1f} MiB, B {:.1f} MiB (A/B {}x{}){}.", peak_a / 1048576.0,
      peak_b / 1048576.0, format_number(ratio),
      large ? fmt::format(", above the {}x {} threshold", options.memory_warn_ratio,
                          options.fail_on_performance ? "failure" : "warning")
            : "",
      a.method == b.method ? "" : "; measured by different methods (details), so indicative only");
  return check;
}

}  // namespace parity::compare
