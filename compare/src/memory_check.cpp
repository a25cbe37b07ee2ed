// Memory: an informational check, like throughput (performance_check.cpp). It judges the largest
// per-replica peak, stating how each producer measured it (the two methods need not count the
// same bytes), and warns (fails with fail_on_performance) when run A's is markedly larger. When
// both runs recorded what each replica holds between steps, parameters plus optimizer state
// (run.json memory.param_bytes_per_replica, optimizer_state_bytes_per_replica), it states them
// side by side with their ratio and each run's layout: a DDP rank holds a full copy of both,
// and so does a pmap device; a jit-fsdp device holds its blocks, about 1/N of them, more where
// a leaf that no dimension of divides by N stays replicated. Those figures come from the
// tensors each producer held, not from its peak, so they compare across producers exactly.
#include <fmt/format.h>

#include <algorithm>

#include "checks.h"
#include "figures.h"

namespace parity::compare {
namespace {

constexpr double kMiB = 1048576.0;

int64_t largest_peak(const MemoryReport& memory) {
  return *std::max_element(memory.peak_bytes_per_replica.begin(),
                           memory.peak_bytes_per_replica.end());
}

// The most parameter + optimizer-state bytes one replica holds; nullopt when not recorded.
std::optional<double> largest_state(const MemoryReport& memory) {
  if (memory.param_bytes_per_replica.empty()) return std::nullopt;
  int64_t largest = 0;
  for (size_t r = 0; r < memory.param_bytes_per_replica.size(); ++r) {
    largest = std::max(largest, memory.param_bytes_per_replica[r] +
                                    memory.optimizer_state_bytes_per_replica[r]);
  }
  return static_cast<double>(largest);
}

// "pmap_engine (jit-fsdp)", or the producer alone when the run did not say its style.
std::string run_name(const RunInfo& info) {
  return info.parallel_style.empty() ? info.producer
                                     : fmt::format("{} ({})", info.producer, info.parallel_style);
}

// "= 1/7.98 of B" when A holds less, "= 1.00x B" otherwise.
std::string ratio_text(double a, double b) {
  const double ratio = ratio_of(a, b);
  if (ratio > 0 && ratio < 1) return fmt::format("= 1/{} of B", format_number(1 / ratio));
  return fmt::format("= {}x B", format_number(ratio));
}

// The sentence on what each replica holds between steps, its figures and details; nothing when
// either run did not record it.
std::string describe_state(const RunPair& runs, Check& check) {
  const RunInfo& a = runs.a.info;
  const RunInfo& b = runs.b.info;
  const std::optional<double> state_a = largest_state(a.memory);
  const std::optional<double> state_b = largest_state(b.memory);
  for (const auto* info : {&a, &b}) {
    if (info->memory.param_bytes_per_replica.empty()) continue;
    check.details.push_back(fmt::format(
        "run {} ({}) holds per replica: parameters {} bytes, optimizer state {} bytes ({})",
        info == &a ? "A" : "B", run_name(*info),
        fmt::join(info->memory.param_bytes_per_replica, ", "),
        fmt::join(info->memory.optimizer_state_bytes_per_replica, ", "),
        info->memory.state_layout));
  }
  if (!state_a || !state_b) return "";
  check.figures.push_back({"state_bytes_a", *state_a, "bytes"});
  check.figures.push_back({"state_bytes_b", *state_b, "bytes"});
  check.figures.push_back({"state_ratio", ratio_of(*state_a, *state_b), "x"});
  return fmt::format(
      "Param+optimizer bytes per device: A {} {} MiB vs B {} {} MiB {} (devices: {}; A: {}). ",
      run_name(a), format_number(*state_a / kMiB), run_name(b), format_number(*state_b / kMiB),
      ratio_text(*state_a, *state_b), a.replicas, a.memory.state_layout);
}

}  // namespace

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
  const std::string state = describe_state(runs, check);
  const bool large = ratio > options.memory_warn_ratio;
  check.status = large ? warning_status(options) : CheckStatus::kPass;
  check.summary = fmt::format(
      "{}Largest per-replica peak: A {:.1f} MiB, B {:.1f} MiB (A/B {}x{}){}.", state,
      peak_a / kMiB, peak_b / kMiB, format_number(ratio),
      large ? fmt::format(", above the {}x {} threshold", options.memory_warn_ratio,
                          options.fail_on_performance ? "failure" : "warning")
            : "",
      a.method == b.method ? "" : "; measured by different methods (details), so indicative only");
  return check;
}

}  // namespace parity::compare
