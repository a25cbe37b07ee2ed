#include "escape.h"

#include <cstdint>
#include <cstdio>

namespace parity::reports {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The length of the well-formed UTF-8 sequence at the start of `text` (1 to 4), or 0 when it is
// not one: a stray continuation byte, a truncated sequence, an overlong encoding, a surrogate or
// a code point past U+10FFFF (the table of Unicode 15, section 3.9, "Well-Formed UTF-8").
size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t second_min = 0x80;
  uint8_t second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < second_min || byte(1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

bool is_forbidden_control(uint8_t c) { return c < 0x20 && c != '\t' && c != '\n' && c != '\r'; }

// Copies `text` with invalid UTF-8 replaced by U+FFFD and, when `replace_controls`, the
// control characters XML forbids written as "\xNN".
std::string clean(std::string_view text, bool replace_controls) {
  std::string result;
  result.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (replace_controls && is_forbidden_control(c)) {
      char visible[8];
      std::snprintf(visible, sizeof visible, "\\x%02X", c);
      result += visible;
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text.substr(i));
    if (length == 0) {
      result += kReplacementCharacter;
      ++i;
      continue;
    }
    // U+FFFE and U+FFFF (EF BF BE, EF BF BF) are outside XML 1.0's Char production too.
    const bool noncharacter =
        length == 3 && text.substr(i, 2) == "\xEF\xBF" && static_cast<uint8_t>(text[i + 2]) >= 0xBE;
    if (noncharacter) {
      result += kReplacementCharacter;
    } else {
      result.append(text, i, length);
    }
    i += length;
  }
  return result;
}

}  // namespace

std::string sanitize(std::string_view text) { return clean(text, true); }

std::string utf8_repair(std::string_view text) { return clean(text, false); }

std::string markup_escape(std::string_view text) {
  std::string escaped;
  for (char c : sanitize(text)) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&apos;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string markup_attribute_escape(std::string_view text) {
  std::string escaped;
  for (char c : markup_escape(text)) {
    switch (c) {
      case '\t':
        escaped += "&#9;";
        break;
      case '\n':
        escaped += "&#10;";
        break;
      case '\r':
        escaped += "&#13;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string markdown_escape(std::string_view text) {
  std::string escaped;
  for (char c : sanitize(text)) {
    switch (c) {
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '|':
      case '~':
      case '>':
      case '$':
        escaped += '\\';
        escaped += c;
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '&':
        escaped += "&amp;";
        break;
      case '\n':
      case '\r':
      case '\t':
        escaped += ' ';
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

}  // namespace parity::reports
