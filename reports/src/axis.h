// Chart axes with "nice" ticks.
//
// Vocabulary:
//   data range   the smallest and largest value to show.
//   tick step    the distance between labelled ticks: 1, 2 or 5 times a power of ten on a linear
//                axis (Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990), a whole
//                number of decades on a log axis.
//   axis range   the data range widened to whole tick steps, so the first and last ticks sit on
//                the plot's edges.
#pragma once

#include <string>
#include <vector>

namespace parity::reports {

struct Axis {
  bool log = false;
  double min = 0;  // axis range, in data units
  double max = 1;
  std::vector<double> ticks;
  std::vector<std::string> tick_labels;

  // Where `value` sits between min (0) and max (1); values outside the range map outside [0, 1].
  // On a log axis `value` must be positive.
  double fraction(double value) const;
};

// About `target_ticks` ticks over [data_min, data_max]. An empty range (data_min == data_max) is
// widened around the value. Both bounds must be finite.
Axis linear_axis(double data_min, double data_max, int target_ticks);

// Whole decades covering [data_min, data_max] (both positive and finite), at most `max_ticks`
// labelled ones; labels read 0.001 to 1000, and 10⁻⁶ style beyond.
Axis log_axis(double data_min, double data_max, int max_ticks);

}  // namespace parity::reports
