#include "axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "number_format.h"

namespace parity::reports {
namespace {

// The nice number (1, 2, 5 or 10 times a power of ten) closest to `span`.
double nice_step(double span) {
  const double exponent = std::floor(std::log10(span));
  const double fraction = span / std::pow(10.0, exponent);
  double nice = 10;
  if (fraction < 1.5) {
    nice = 1;
  } else if (fraction < 3) {
    nice = 2;
  } else if (fraction < 7) {
    nice = 5;
  }
  return nice * std::pow(10.0, exponent);
}

// A tick value with as many decimals as the step needs: step 0.05 -> "0.45", step 2 -> "12".
// `scientific` axes (all ticks below 1e-3 or from 1e6 in magnitude) write 2e-5, 1.2e-4 instead.
std::string linear_tick_label(double value, double step, bool scientific) {
  const int step_exponent = static_cast<int>(std::floor(std::log10(step) + 1e-9));
  char text[48];
  if (!scientific) {
    std::snprintf(text, sizeof text, "%.*f", std::max(0, -step_exponent), value);
    return text;
  }
  if (value == 0) return "0";
  const int value_exponent = static_cast<int>(std::floor(std::log10(std::fabs(value)) + 1e-9));
  return format_scientific(value, std::max(0, value_exponent - step_exponent));
}

// 10^exponent as "0.001" .. "1000", else "10⁻⁶" with Unicode superscripts.
std::string decade_label(int exponent) {
  if (exponent >= -3 && exponent <= 3) return format_number(std::pow(10.0, exponent));
  static const char* const kSuperscriptDigits[] = {"⁰", "¹", "²", "³", "⁴",
                                                   "⁵", "⁶", "⁷", "⁸", "⁹"};
  std::string label = "10";
  if (exponent < 0) label += "⁻";
  for (char digit : std::to_string(std::abs(exponent))) label += kSuperscriptDigits[digit - '0'];
  return label;
}

}  // namespace

double Axis::fraction(double value) const {
  if (log) return (std::log10(value) - std::log10(min)) / (std::log10(max) - std::log10(min));
  return (value - min) / (max - min);
}

Axis linear_axis(double data_min, double data_max, int target_ticks) {
  if (data_min == data_max) {
    const double half_width = data_min == 0 ? 1 : std::fabs(data_min) * 0.1;
    data_min -= half_width;
    data_max += half_width;
  }
  const double step = nice_step((data_max - data_min) / std::max(1, target_ticks - 1));
  const auto first = static_cast<long long>(std::floor(data_min / step + 1e-9));
  const auto last = static_cast<long long>(std::ceil(data_max / step - 1e-9));
  Axis axis;
  axis.min = static_cast<double>(first) * step;
  axis.max = static_cast<double>(last) * step;
  const double magnitude = std::max(std::fabs(axis.min), std::fabs(axis.max));
  const bool scientific = magnitude < 1e-3 || magnitude >= 1e6;
  for (long long i = first; i <= last; ++i) {
    // Multiplying the index (not adding steps) keeps 0 exactly 0 and avoids drift.
    const double tick = static_cast<double>(i) * step;
    axis.ticks.push_back(tick);
    axis.tick_labels.push_back(linear_tick_label(tick, step, scientific));
  }
  return axis;
}

Axis log_axis(double data_min, double data_max, int max_ticks) {
  int low = static_cast<int>(std::floor(std::log10(data_min)));
  int high = static_cast<int>(std::ceil(std::log10(data_max)));
  if (high == low) ++high;
  // The fewest decades per tick that keep the tick count within max_ticks.
  const int stride = std::max(1, (high - low + max_ticks - 2) / std::max(1, max_ticks - 1));
  // Widen the top so that both ends sit on a labelled decade.
  high = low + stride * ((high - low + stride - 1) / stride);
  Axis axis;
  axis.log = true;
  axis.min = std::pow(10.0, low);
  axis.max = std::pow(10.0, high);
  for (int exponent = low; exponent <= high; exponent += stride) {
    axis.ticks.push_back(std::pow(10.0, exponent));
    axis.tick_labels.push_back(decade_label(exponent));
  }
  return axis;
}

}  // namespace parity::reports
