// Turns per-step wall times into the timing summary of run.json: the first step apart (it
// includes warm-up or compilation), then the median and interquartile range of the rest.
#pragma once

#include <vector>

#include "parity/common/run_dir.h"

namespace parity {

RunTimings summarize_step_times(double setup_seconds, const std::vector<double>& step_seconds);

}  // namespace parity
