// ComparisonResults built by hand, as compare will fill them, for the reports' tests.
#pragma once

#include <string>
#include <vector>

#include "parity/compare/result.h"

namespace parity::testing {

// Strings that break each report format when not escaped: HTML/XML markup, a CDATA end, a
// Markdown table cell separator and emphasis, an XML-forbidden control character, a terminal
// escape sequence, invalid UTF-8.
inline const std::string kScript = "<script>alert(1)</script>";
inline const std::string kPipe = "a|b";
inline const std::string kCdataEnd = "]]>";
inline const std::string kAmpersand = "Q&A";
inline const std::string kControl = std::string("bell\x07") + "here";
inline const std::string kTerminalEscape = "\x1b[31mred";
inline const std::string kInvalidUtf8 =
    "bad\xff"
    "byte";
inline const std::string kMarkdown = "*bold* _it_ [link](http://x) `code` ~~s~~ $x$";

// mlp2-fmnist on 8 replicas, 200 Adam steps: every check passes, losses within 1e-7.
compare::ComparisonResult passing_result();

// The same case with pitfall P2 (psum, not pmean) under SGD: gradients 8x, the loss of A
// diverges and becomes NaN from step 150. Checks of every status, a P2 diagnosis, worst
// tensors, and the hostile strings above in every kind of field.
compare::ComparisonResult failing_result();

// mlp-fmnist-dropout over 4 seeds of each producer (parity run --seeds): the test loss
// equivalent within its margin, the test accuracy inconclusive, and a hostile seed label.
compare::ComparisonResult seeds_result();

}  // namespace parity::testing
