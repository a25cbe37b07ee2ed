// Validators for every numeric command-line option: each value must be finite and in its range.
// CLI11's own Range, PositiveNumber and NonNegativeNumber test `value < min || value > max`,
// which is false for NaN, so they let `--loss-rtol nan` through; these test finiteness first.
// A refused value is a CLI::ValidationError, which main.cpp turns into exit code 2 with the
// message "--OPTION: VALUE is not accepted; expected RANGE".
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

#include "parity/common/case_limits.h"

namespace parity::cli {

// The longest a process waits for others (--timeout): a week. Longer is a hang, and seconds
// become std::chrono durations, which a value like 1e300 would overflow.
inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;

// A finite number in [minimum, maximum] (maximum = infinity: no upper bound); with
// `minimum_excluded`, in (minimum, maximum].
CLI::Validator number_in(double minimum, double maximum, bool minimum_excluded = false);
// A finite number >= 0: tolerances, percentages without an upper bound.
CLI::Validator non_negative_number();
// A finite number > 0 and <= maximum: timeouts.
CLI::Validator positive_number(double maximum);
// Any finite number.
CLI::Validator finite_number();
// A whole number in [minimum, maximum].
CLI::Validator integer_in(int64_t minimum, int64_t maximum);

}  // namespace parity::cli
