// The report page's stylesheet, inlined into report.html (the page loads nothing).
#pragma once

namespace parity::reports {

// Contains neither '<' nor '&', so the page stays well-formed XML as well as HTML.
extern const char* const kReportCss;

}  // namespace parity::reports
