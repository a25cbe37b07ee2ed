// What the catalogue's human-readable reports (index.html, catalogue.md) show, as plain text,
// apart from the markup: the verdict, the counts, the headline, the column headings, and the
// report link made safe. Each renderer escapes the text for its format.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parity/compare/result.h"
#include "parity/reports/catalogue.h"

namespace parity::reports {

// The catalogue fails when any case differs from its expectation; a case not supported yet says
// so in its row and does not fail it.
bool catalogue_passes(const std::vector<CatalogueEntry>& entries);

// "CATALOGUE PASSES" or "CATALOGUE FAILS".
const char* catalogue_banner(const std::vector<CatalogueEntry>& entries);

// An outcome speaks in the checks' tones and marks: as expected like a pass, differs like a fail,
// not yet supported like a check no run recorded (grey: news, not a failure).
compare::CheckStatus outcome_as_status(CaseOutcome outcome);

struct OutcomeCount {
  CaseOutcome outcome;
  size_t count;
};

// How many entries have each outcome: all three, in the enum's order, zeros included ("0
// differs" is what a reader of a passing catalogue looks for).
std::vector<OutcomeCount> outcome_counts(const std::vector<CatalogueEntry>& entries);

// One sentence under the banner: how many cases behave as expected and, when some differs, which.
std::string catalogue_headline(const std::vector<CatalogueEntry>& entries);

// How many cases reached each verdict on their claims, in the order of first appearance:
// "14 confirmed · 6 partly · 5 refuted".
std::string verdict_tally(const std::vector<CatalogueEntry>& entries);

// The CSS class of a verdict's chip: "verdict-confirmed", "verdict-not-reproducible-here", ...
std::string verdict_class(const std::string& verdict);

// The table's column headings: case, title, claim, verdict, observed, fact check, expected,
// outcome. Every field of an entry but its figures is in its row; the short ones share a cell
// so that the prose gets the width: the case file's name and the source under the title, the
// report link under the outcome.
const std::vector<std::string>& catalogue_columns();

// `report_link` as a link target for HTML and Markdown alike, or nullopt when it is empty or not
// a relative path. Refused: anything with a scheme (a ':' before the first '/', '?' or '#', which
// covers "javascript:", "data:", "https:", also with the spaces and tabs a browser strips before
// reading a scheme) and a leading '/' or '\' (an absolute or network path: browsers read '\' as
// '/'). What is kept is percent-encoded except for letters, digits and - . _ ~ / % ? # = + , ; :
// @, so that it holds no quote, space, parenthesis, '|' or '<' in either format.
std::optional<std::string> safe_report_link(const std::string& report_link);

// Shown instead of a link that safe_report_link refused, and why.
inline constexpr const char* kRefusedLinkNote = "link refused";
inline constexpr const char* kRefusedLinkReason = "the report link is not a relative path";

}  // namespace parity::reports
