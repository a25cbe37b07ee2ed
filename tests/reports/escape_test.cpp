// Escaping for each format: markup (HTML, SVG, XML), Markdown, and the sanitizing under both
// (control characters, invalid UTF-8).
#include "escape.h"

#include <gtest/gtest.h>

namespace parity::reports {
namespace {

TEST(ReportEscape, MarkupEscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(markup_escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt; &amp; &quot;q&quot;");
  EXPECT_EQ(markup_escape("]]>"), "]]&gt;");
  EXPECT_EQ(markup_escape("plain text, ünïcode Δ ✓"), "plain text, ünïcode Δ ✓");
}

TEST(ReportEscape, AttributesKeepLineBreaksAsReferences) {
  EXPECT_EQ(markup_attribute_escape("a\nb\tc\"d"), "a&#10;b&#9;c&quot;d");
  EXPECT_EQ(markup_escape("a\nb"), "a\nb");
}

TEST(ReportEscape, ControlCharactersXmlForbidsBecomeVisible) {
  EXPECT_EQ(sanitize(std::string("a\x01"
                                 "b\x1b[31m") +
                     '\0' + "c"),
            "a\\x01b\\x1B[31m\\x00c");
  EXPECT_EQ(sanitize("tab\tline\nreturn\r"), "tab\tline\nreturn\r");
}

TEST(ReportEscape, InvalidUtf8BecomesReplacementCharacters) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(sanitize("a\xff"
                     "b"),
            "a" + replacement + "b");
  EXPECT_EQ(sanitize("\xC3"), replacement);                                      // truncated
  EXPECT_EQ(sanitize("\xC0\xAF"), replacement + replacement);                    // overlong '/'
  EXPECT_EQ(sanitize("\xED\xA0\x80"), replacement + replacement + replacement);  // surrogate
  // Past U+10FFFF: the lead byte and each stray continuation byte.
  EXPECT_EQ(sanitize("\xF4\x90\x80\x80"), replacement + replacement + replacement + replacement);
  EXPECT_EQ(sanitize("\xEF\xBF\xBF"), replacement);             // U+FFFF, not an XML character
  EXPECT_EQ(sanitize("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // U+1F600 stays
}

TEST(ReportEscape, Utf8RepairKeepsControlCharacters) {
  EXPECT_EQ(utf8_repair("a\x01\xff"), "a\x01\xEF\xBF\xBD");
}

TEST(ReportEscape, MarkdownEscapesWhatWouldFormat) {
  EXPECT_EQ(markdown_escape("a|b"), "a\\|b");
  EXPECT_EQ(markdown_escape("*x* _y_ `z` [l](u) ~s~ $m$ \\"),
            "\\*x\\* \\_y\\_ \\`z\\` \\[l\\](u) \\~s\\~ \\$m\\$ \\\\");
  EXPECT_EQ(markdown_escape("<script>&amp;"), "&lt;script\\>&amp;amp;");
  EXPECT_EQ(markdown_escape("line\nbreak"), "line break");
}

}  // namespace
}  // namespace parity::reports
