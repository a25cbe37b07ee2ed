#include "numeric_options.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>

namespace parity::cli {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// "a finite number >= 0", "a finite number in (0, 604800]", "a whole number in [1, 1024]".
std::string describe(const char* kind, double minimum, double maximum, bool minimum_excluded) {
  if (std::isinf(minimum) && std::isinf(maximum)) return fmt::format("a {}", kind);
  if (std::isinf(maximum)) {
    return fmt::format("a {} {} {}", kind, minimum_excluded ? ">" : ">=", minimum);
  }
  return fmt::format("a {} in {}{}, {}]", kind, minimum_excluded ? "(" : "[", minimum, maximum);
}

CLI::Validator refusing(std::string expected, std::function<bool(const std::string&)> accepts) {
  CLI::Validator validator(
      [expected, accepts](std::string& input) -> std::string {
        if (accepts(input)) return "";
        return fmt::format("{} is not accepted; expected {}", input, expected);
      },
      expected);
  return validator;
}

}  // namespace

CLI::Validator number_in(double minimum, double maximum, bool minimum_excluded) {
  return refusing(describe("finite number", minimum, maximum, minimum_excluded),
                  [=](const std::string& input) {
                    double value = 0;
                    if (!CLI::detail::lexical_cast(input, value) || !std::isfinite(value)) {
                      return false;
                    }
                    return (minimum_excluded ? value > minimum : value >= minimum) &&
                           value <= maximum;
                  });
}

CLI::Validator non_negative_number() { return number_in(0, kInfinity); }

CLI::Validator positive_number(double maximum) { return number_in(0, maximum, true); }

CLI::Validator finite_number() { return number_in(-kInfinity, kInfinity); }

CLI::Validator integer_in(int64_t minimum, int64_t maximum) {
  return refusing(describe("whole number", static_cast<double>(minimum),
                           static_cast<double>(maximum), false),
                  [=](const std::string& input) {
                    int64_t value = 0;
                    return CLI::detail::lexical_cast(input, value) && value >= minimum &&
                           value <= maximum;
                  });
}

}  // namespace parity::cli
