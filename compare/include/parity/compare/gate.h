// The regression gate: a candidate run judged against a stored golden run of the same case
// (the baseline) with compare's checks, where the performance checks fail instead of warning
// past a threshold ("fail if samples/s drops more than 5%").
//
// Tolerances can be calibrated: N reruns of the baseline's case are compared with the baseline,
// and the largest deviation each check saw, times a margin, becomes its tolerance. They are
// stored beside the baseline in gate.json, keyed by platform (the same job on another CPU, or
// with another thread count, deviates differently and runs at another speed):
//
//   {"format": "parity-gate", "schema_version": 1, "calibrations": {PLATFORM: {
//      "producer": "ddp_ref", "reruns": 3, "margin": 2, "calibrated_at": "2026-12-03T...Z",
//      "observed":   {"loss_max_abs": ..., "tensor_max_abs": ..., "throughput_drop": ...,
//                     "memory_growth": ...},
//      "tolerances": {"loss_atol": ..., "tensor_atol": ..., "max_throughput_drop": ...,
//                     "max_memory_growth": ...}}}}
//
// Drops and growths are fractions (0.05 is 5%). Reruns that reproduce the baseline's bits give
// tolerances of 0: the gate then asks for the same bits.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "parity/compare/result.h"

namespace parity::compare {

struct GateThresholds {
  double max_throughput_drop = 0.05;  // candidate samples/s below (1 - this) x baseline fails
  double max_memory_growth = 0.10;    // candidate peak bytes above (1 + this) x baseline fails
};

struct Calibration {
  std::string platform;
  std::string producer;
  int64_t reruns = 0;
  double margin = 2;
  std::string calibrated_at;
  // The largest deviation of any rerun from the baseline.
  double loss_max_abs = 0;
  double tensor_max_abs = 0;
  double throughput_drop = 0;  // 1 - rerun samples/s / baseline's, at most; 0 when none slower
  double memory_growth = 0;    // rerun peak / baseline peak - 1, at most; 0 when none larger
  // Derived: the deviations times the margin; the performance ones at least the thresholds the
  // calibration was given.
  double loss_atol = 0;
  double tensor_atol = 0;
  double max_throughput_drop = 0;
  double max_memory_growth = 0;
};

// "linux-x86_64, <CPU model>, <N> hardware threads": what a calibration is keyed by.
std::string current_platform();

// Every calibration in BASELINE/gate.json (none when the file is absent); InputError naming the
// file and the key for a malformed one, including a number that is null or not finite (JSON
// has no NaN: a NaN written by an older parity reads back as null), with the fix: recalibrate.
std::map<std::string, Calibration> read_calibrations(const std::filesystem::path& baseline_dir);
// Adds (or replaces) `calibration` under its platform in BASELINE/gate.json, atomically, keeping
// the other platforms'. InputError, and the file untouched, when any of its numbers is not
// finite.
void write_calibration(const std::filesystem::path& baseline_dir, const Calibration& calibration);

// Compares each rerun with the baseline and derives the tolerances. InputError when there is no
// rerun, a rerun is incomplete or of another case, or `margin` is not a finite number >= 1.
Calibration calibrate(const RunDir& baseline, const std::vector<RunDir>& reruns, double margin,
                      const GateThresholds& floors);

// compare's options for the gate: same case required, performance failing past the thresholds
// (the larger of `thresholds` and the calibration's; throughput judged by the confidence interval
// of the step-time quantile ratio, speed_verdict.h, from the two runs' steps until the caller adds
// interleaved reruns to options.speed), and the calibration's tolerances (exact per step: no
// rtol, no approximate lane) when there is one.
CompareOptions gate_options(const GateThresholds& thresholds,
                            const std::optional<Calibration>& calibration);

}  // namespace parity::compare
