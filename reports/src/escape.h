// Escaping of input strings for each output format.
//
// Every string in a ComparisonResult may come from input a user controls (run directories, case
// files, host names), so none reaches a report unescaped. Two steps:
//   sanitize      make the text representable anywhere: invalid UTF-8 becomes U+FFFD and the
//                 control characters XML 1.0 forbids (everything below U+0020 except tab, line
//                 feed and carriage return; they cannot even be written as &#1;) become a
//                 visible "\xNN". This also keeps terminal escape sequences (ESC) out of the
//                 terminal summary.
//   escape        then quote what the format treats as markup.
#pragma once

#include <string>
#include <string_view>

namespace parity::reports {

std::string sanitize(std::string_view text);

// Only the first half of sanitize: invalid UTF-8 becomes U+FFFD, control characters stay. For
// formats that escape control characters themselves (JSON).
std::string utf8_repair(std::string_view text);

// Text or attribute value in HTML, SVG or XML: sanitize, then & < > " ' as character
// references. Only the five references every XML parser knows are used, so the same text is
// valid in HTML, inline SVG and junit.xml. In attributes, tab and line breaks become references
// too, because an XML parser would otherwise normalize them to spaces.
std::string markup_escape(std::string_view text);
std::string markup_attribute_escape(std::string_view text);

// Inline text in GitHub-flavoured Markdown, including table cells: sanitize, backslash-escape
// the characters that start emphasis, links, code, math or table cells (\ ` * _ [ ] | ~ > $),
// write < and & as references (GitHub renders inline HTML), and turn line breaks into spaces (a
// line break would end a table row or a list item).
std::string markdown_escape(std::string_view text);

}  // namespace parity::reports
