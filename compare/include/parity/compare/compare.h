// Comparing two run directories: the checks, the diagnosis and the verdict (result.h).
//
//   ComparisonResult result = compare_run_dirs("runs/pmap", "runs/ddp", {});
//   return exit_code(result.verdict);  // 0 equivalent, 1 not equivalent, 3 incomplete
//
// Run A is the run under test, run B the reference (usually ddp_ref): relative errors divide by
// B. The checks, in the order the result lists them:
//
//   case         same case hash; the keys that differ when not (warning, or failure with
//                require_same_case)
//   loss_curve   global and per-replica losses at every step both runs recorded
//   gradients    reduced gradients at the steps both runs recorded tensors
//   parameters   parameters after the update at those steps
//   replicas     every replica of a run holds bit-identical parameters (digests)
//   data         the same global sample ids per step (digests)
//   rng          not recorded by any producer yet
//   oracle       each run's error against a third, more precise run, when one is given:
//                the losses, and every tensor all three recorded (tensor_oracle.cpp)
//   throughput   steady-state samples/s and step times (informational)
//   memory       peak bytes per replica (informational)
//
// Informational checks warn, never fail, unless fail_on_performance is set.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/run_dir.h"
#include "parity/compare/result.h"

namespace parity::compare {

struct CompareOptions {
  // Overrides of the defaults in tolerance.h; unset keeps the default.
  std::optional<double> loss_rtol;
  std::optional<double> loss_atol;
  std::optional<double> tensor_rtol;
  std::optional<double> tensor_atol;
  std::optional<int64_t> allowed_bad_steps;

  // Different case hashes fail the "case" check instead of warning.
  bool require_same_case = false;

  // Informational checks: warn when A's steady samples/s is below throughput_warn_ratio times
  // B's, or A's largest per-replica peak memory above memory_warn_ratio times B's.
  double throughput_warn_ratio = 0.8;
  double memory_warn_ratio = 1.25;
  bool fail_on_performance = false;  // those warnings fail the check instead
  // The gate's throughput verdict (speed_verdict.h): when set, the throughput check judges the
  // confidence interval of the step-time quantile ratio against throughput_warn_ratio instead of
  // the two medians alone. Its runs are interleaved reruns of B's case (speed_runs_b) and A's
  // (speed_runs_a), the i-th of each made one after the other; with none, A's and B's own
  // steps are the one pair. Runs without per-step times fall back to the medians.
  struct SpeedRuns {
    std::vector<std::vector<double>> a, b;  // each run's steady step times, seconds
    double confidence = 0.95;
  };
  std::optional<SpeedRuns> speed;

  // A third run of the same case in higher precision (e.g. the engine in f64), not owned. Each
  // run's largest loss error against it is measured; run A passes when
  //   err_A <= oracle_factor * err_B + oracle_floor
  // (A may be worse than the reference, but not by more than the factor, beyond the floor).
  // The floor defaults to the runs' dtype tolerance of the loss (assert_close's, before any
  // --loss-rtol/--loss-atol) at the oracle's largest |loss|: a difference the loss check calls
  // rounding is rounding here too. nullptr: the oracle check is "not recorded". An oracle that
  // is incomplete or lacks a step or tensor step both runs recorded is refused: it judges
  // nothing and the verdict is kIncomplete.
  const RunDir* oracle = nullptr;
  double oracle_factor = 2.0;
  std::optional<double> oracle_floor;
};

// Judges run A against run B. Reads recorded tensors from the run directories; a malformed
// tensor file throws InputError naming it. An incomplete or running run gives the verdict
// kIncomplete, with what both recorded still compared.
ComparisonResult compare_runs(const RunDir& a, const RunDir& b, const CompareOptions& options);

// Reads both run directories (InputError naming the file on bad input) and compares them.
ComparisonResult compare_run_dirs(const std::filesystem::path& a, const std::filesystem::path& b,
                                  const CompareOptions& options);

// The rules of the framework defaults (M1, M2, M4-M7, M9, M10: compare/src/default_rules.h),
// each run on its own after the checks instead of the first match among all rules: the ids
// whose fingerprint the pair shows. What the confusion table (docs/catalogue.md) of the M cases is made from.
std::vector<std::string> matching_default_rules(const RunDir& a, const RunDir& b,
                                                const CompareOptions& options);

}  // namespace parity::compare
