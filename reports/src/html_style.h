// The report pages' stylesheets, inlined into the pages (which load nothing).
#pragma once

namespace parity::reports {

// Neither contains '<' or '&', so the pages stay well-formed XML as well as HTML.

// report.html's, which the catalogue's index.html uses too (verdict, badge, pills, cards, tables).
extern const char* const kReportCss;

// What index.html adds: the catalogue's table, stacked into cards on a phone.
extern const char* const kCatalogueCss;

}  // namespace parity::reports
