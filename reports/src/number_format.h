// Numbers as people read them in reports: four significant digits, short exponents, binary
// byte units, seconds scaled to ms or µs, and the non-finite values spelled out.
#pragma once

#include <string>

#include "parity/compare/result.h"

namespace parity::reports {

// 0.4922, 3.1e-6, 200, 12346 (at least 1000: rounded to an integer; from 1e15: 1.235e15);
// "NaN", "inf", "-inf".
std::string format_number(double value);
// Scientific notation with a short exponent and `mantissa_decimals` decimals: 1.2e-4, 2e-5.
std::string format_scientific(double value, int mantissa_decimals);
// 512 B, 6.9 KiB, 6.92 MiB, 1.5 GiB.
std::string format_bytes(double num_bytes);
// 12.5 µs, 66.41 ms, 1.25 s.
std::string format_seconds(double seconds);
// A figure's value with its unit: bytes and seconds scaled as above, "x" as "8×",
// others as "value unit".
std::string format_figure_value(const compare::Figure& figure);
// "max_abs_error" -> "max abs error".
std::string figure_label(const std::string& name);

}  // namespace parity::reports
