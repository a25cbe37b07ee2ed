#include "parity/common/step_timing.h"

#include <algorithm>

namespace parity {

double quantile_of_sorted(const std::vector<double>& sorted_values, double q) {
  if (sorted_values.empty()) return 0;
  double position = q * static_cast<double>(sorted_values.size() - 1);
  size_t below = static_cast<size_t>(position);
  size_t above = std::min(below + 1, sorted_values.size() - 1);
  double fraction = position - static_cast<double>(below);
  return sorted_values[below] + fraction * (sorted_values[above] - sorted_values[below]);
}

RunTimings summarize_step_times(double setup_seconds, const std::vector<double>& step_seconds) {
  RunTimings timings;
  timings.setup_seconds = setup_seconds;
  if (step_seconds.empty()) return timings;
  timings.first_step_seconds = step_seconds.front();
  std::vector<double> steady(step_seconds.begin() + 1, step_seconds.end());
  std::sort(steady.begin(), steady.end());
  timings.steady_steps = static_cast<int64_t>(steady.size());
  timings.steady_step_median_seconds = quantile_of_sorted(steady, 0.5);
  timings.steady_step_spread_seconds =
      quantile_of_sorted(steady, 0.75) - quantile_of_sorted(steady, 0.25);
  return timings;
}

}  // namespace parity
