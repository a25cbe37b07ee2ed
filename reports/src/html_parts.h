// Pieces of markup that both HTML pages use (a comparison's report.html and the catalogue's
// index.html), so that the two look alike: the page's head and the status pills.
#pragma once

#include <string>

#include "parity/compare/result.h"

namespace parity::reports {

// The CSS class that gives an element its status's tone: "tone-pass", "tone-fail", "tone-warn",
// "tone-none" (html_style.cpp).
const char* status_tone(compare::CheckStatus status);

// The mark beside a status word: ✓ pass, ✗ fail, ! warn, – not recorded.
const char* status_mark(compare::CheckStatus status);

// A pill in the status's tone: its mark, then `markup` (already escaped).
std::string status_pill(compare::CheckStatus status, const std::string& markup);

// The page up to and including <body>: doctype, charset, viewport, `title` (already escaped) and
// the report stylesheet followed by `extra_css` (which, like it, holds neither '<' nor '&').
std::string page_start(const std::string& title, const char* extra_css = "");

}  // namespace parity::reports
