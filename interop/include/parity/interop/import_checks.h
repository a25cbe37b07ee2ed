// What every import checks of a step number, whichever file or option it came from: a run
// directory's steps are 0-based optimizer steps, and every one must be nameable as a tensor
// file, step_NNNNNN.safetensors, whose digits common/run_dir/src/recorded_tensors.cpp's step_of_tensor_file
// reads back (up to 18 of them).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "parity/common/error.h"

namespace parity::interop {

// The largest step a step file's name holds: 18 digits.
inline constexpr int64_t kMaxImportedStep = 999'999'999'999'999'999;

// Throws InputError "{where}: step {step} is negative / beyond ...; {fix}" unless
// 0 <= step <= kMaxImportedStep. `where` names the option or the file and line; `fix` says
// what to pass or log instead.
inline void check_imported_step(int64_t step, const std::string& where, const std::string& fix) {
  if (step >= 0 && step <= kMaxImportedStep) return;
  throw InputError(fmt::format(
      "{}: step {} is {}; steps are 0-based optimizer steps of at most 18 digits (0 to {}). {}",
      where, step, step < 0 ? "negative" : "beyond what a step_NNNNNN file name holds",
      kMaxImportedStep, fix));
}

}  // namespace parity::interop
