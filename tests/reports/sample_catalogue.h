// Catalogue entries built by hand, as `parity cases run` fills them, for the catalogue report's
// tests.
#pragma once

#include <string>
#include <vector>

#include "parity/reports/catalogue.h"

namespace parity::testing {

// A report link that must never become a link.
inline const std::string kHostileLink = "javascript:alert(1)";

// Six cases in catalogue order, with texts like the case files': S1, P1 and P4 as expected (an
// equivalent comparison, an expected error with its case page, an expected diagnosis; verdicts
// confirmed and partly), P2 differing (trained with the faithful program, it came out
// equivalent; its verdict unsettled), S9 and P10 not yet supported. A seventh, X1, as expected,
// holds the hostile strings of sample_results.h (markup, '|', line breaks, a control character,
// invalid UTF-8) in every field, figures included, and kHostileLink as its report link.
std::vector<reports::CatalogueEntry> sample_catalogue();

// The same without P2 and X1: the catalogue passes.
std::vector<reports::CatalogueEntry> passing_catalogue();

}  // namespace parity::testing
