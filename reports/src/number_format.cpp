#include "number_format.h"

#include <cmath>
#include <cstdio>

namespace parity::reports {
namespace {

// printf's output with the exponent shortened: "3.1e-06" -> "3.1e-6", "1.2e+05" -> "1.2e5".
std::string short_exponent(const char* text) {
  std::string result = text;
  const size_t e = result.find('e');
  if (e == std::string::npos) return result;
  std::string mantissa = result.substr(0, e);
  std::string exponent = result.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent.erase(0, exponent.find_first_not_of("+-0"));
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

// printf's %.*g, exponent shortened.
std::string significant_digits(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return short_exponent(text);
}

std::string scaled(double value, const char* unit) {
  return significant_digits(value, value >= 100 ? 4 : 3) + " " + unit;
}

}  // namespace

std::string format_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Integers, and values of 1000 or more (rounded), in full: 200, 12346, not 1.235e4.
  if ((value == std::floor(value) || std::fabs(value) >= 1000) && std::fabs(value) < 1e15) {
    char text[32];
    std::snprintf(text, sizeof text, "%.0f", value);
    return text;
  }
  return significant_digits(value, 4);
}

std::string format_scientific(double value, int mantissa_decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*e", mantissa_decimals, value);
  return short_exponent(text);
}

std::string format_bytes(double num_bytes) {
  if (!std::isfinite(num_bytes)) return format_number(num_bytes);
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  int unit = -1;
  double value = num_bytes;
  while (std::fabs(value) >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  if (unit < 0) return format_number(num_bytes) + " B";
  return scaled(value, kUnits[unit]);
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return format_number(seconds);
  const double magnitude = std::fabs(seconds);
  if (magnitude == 0) return "0 s";
  if (magnitude < 1e-3) return scaled(seconds * 1e6, "µs");
  if (magnitude < 1) return scaled(seconds * 1e3, "ms");
  return scaled(seconds, "s");
}

std::string format_figure_value(const compare::Figure& figure) {
  if (figure.unit == "bytes") return format_bytes(figure.value);
  if (figure.unit == "s") return format_seconds(figure.value);
  if (figure.unit == "x") return format_number(figure.value) + "×";
  if (figure.unit.empty()) return format_number(figure.value);
  return format_number(figure.value) + " " + figure.unit;
}

std::string figure_label(const std::string& name) {
  std::string label = name;
  for (char& c : label) {
    if (c == '_') c = ' ';
  }
  return label;
}

}  // namespace parity::reports
