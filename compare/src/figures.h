// Small helpers every check uses to state its figures: ratios that survive zeros, numbers and step
// lists formatted for one-sentence summaries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parity::compare {

// a / b, with 0 / 0 = 1 (nothing vs nothing agrees) and x / 0 = infinity for x != 0.
double ratio_of(double a, double b);

// 3 significant digits: "3.5e-06", "0.492", "8", "NaN".
std::string format_number(double value);
// `text` without trailing whitespace (producers' failure messages may end in a space).
std::string trim_right(const std::string& text);
// "3, 4, 7" or, past `shown` entries, "3, 4, 7, 9, 12 (+20 more)".
std::string format_steps(const std::vector<int64_t>& steps, size_t shown = 5);

}  // namespace parity::compare
