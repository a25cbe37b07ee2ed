// How much of a long list the human-readable reports show; report.json always has everything.
#pragma once

#include <cstddef>

namespace parity::reports {

// Rows of a check's worst-tensors table (they come worst first).
inline constexpr size_t kMaxListedTensors = 20;
// Lines of a check's details (worst first).
inline constexpr size_t kMaxListedDetails = 30;

}  // namespace parity::reports
