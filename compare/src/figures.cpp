#include "figures.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace parity::compare {

double ratio_of(double a, double b) {
  if (b != 0) return a / b;
  return a == 0 ? 1 : std::numeric_limits<double>::infinity();
}

std::string format_number(double value) {
  if (std::isnan(value)) return "NaN";
  return fmt::format("{:.3g}", value);
}

std::string trim_right(const std::string& text) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? "" : text.substr(0, end + 1);
}

std::string format_steps(const std::vector<int64_t>& steps, size_t shown) {
  std::string text;
  for (size_t i = 0; i < steps.size() && i < shown; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(steps[i]);
  }
  if (steps.size() > shown) text += fmt::format(" (+{} more)", steps.size() - shown);
  return text;
}

}  // namespace parity::compare
