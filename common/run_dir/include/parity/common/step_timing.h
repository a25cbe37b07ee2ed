// Turns per-step wall times into the timing summary of run.json: the first step apart (it
// includes warm-up or compilation), then the median and interquartile range of the rest.
#pragma once

#include <vector>

#include "parity/common/run_dir.h"

namespace parity {

RunTimings summarize_step_times(double setup_seconds, const std::vector<double>& step_seconds);

// The q-quantile of ascending values by linear interpolation between order statistics (NumPy's
// default "linear" method), the one run.json's medians use; 0 for no values.
double quantile_of_sorted(const std::vector<double>& sorted_values, double q);

}  // namespace parity
