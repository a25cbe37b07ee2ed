// The terminal summary: what `parity compare` prints when it is done.
//
//   parity: NOT EQUIVALENT
//     Gradients are 8× DDP's from step 1: summed over devices, not averaged.
//
//     check             status        result
//     Loss curve        fail          Loss differs beyond tolerance from step 1.
//     Gradients         fail          Gradient norms are 8.00× B's at every recorded step.
//     Throughput        pass          A trains 3.9e+04 samples/s, B 1.1e+04: A/B throughput …
//
//     diagnosis P2  Gradients summed, not averaged · fix: use pmean, not psum.
//
// A check's result is its summary sentence, cut to one line (the reports hold it whole and every
// figure behind it): the sentence names the figure that matters for that check and outcome,
// where a fixed "first figure" would show e.g. a step count for a passing loss curve. Widths count
// code points, which is what a terminal shows for the text reports hold. Input strings are
// sanitized: an escape sequence in a run directory cannot reach the terminal.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "escape.h"
#include "parity/reports/reports.h"

namespace parity::reports {
namespace {

using compare::Check;
using compare::CheckStatus;
using compare::ComparisonResult;

constexpr size_t kMaxTitleWidth = 28;
constexpr size_t kMaxResultWidth = 100;

// Sanitized and on one line: line breaks and tabs would break the table.
std::string one_line(const std::string& text) {
  std::string line = sanitize(text);
  std::replace_if(
      line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  return line;
}

size_t display_width(const std::string& text) {
  // Every byte but UTF-8 continuation bytes starts a code point.
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// `text` cut to `width` code points, the last one an ellipsis when cut.
std::string fit(const std::string& text, size_t width) {
  if (display_width(text) <= width) return text;
  std::string cut;
  size_t points = 0;
  for (char c : text) {
    const bool starts_point = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (starts_point && ++points == width) break;
    cut += c;
  }
  return cut + "…";
}

std::string pad(const std::string& text, size_t width) {
  return text + std::string(width - std::min(width, display_width(text)), ' ');
}

const char* ansi_color(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "\033[32m";
    case CheckStatus::kFail:
      return "\033[31m";
    case CheckStatus::kWarn:
      return "\033[33m";
    case CheckStatus::kNotRecorded:
      return "\033[2m";
  }
  return "";
}

// `text` in the status's colour when `color`.
std::string paint(const std::string& text, CheckStatus status, bool color) {
  return color ? ansi_color(status) + text + "\033[0m" : text;
}

std::string result_line(const Check& check) {
  return fit(one_line(check.summary), kMaxResultWidth);
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

std::string render_terminal_summary(const ComparisonResult& result, bool color) {
  const CheckStatus tone = verdict_tone(result.verdict);
  std::string verdict = upper(compare::to_string(result.verdict));
  if (color) verdict = "\033[1m" + paint(verdict, tone, true);
  std::string out = "parity: " + verdict + "\n";
  if (!result.headline.empty()) out += "  " + one_line(result.headline) + "\n";

  if (!result.checks.empty()) {
    size_t title_width = std::string("check").size();
    for (const Check& check : result.checks) {
      title_width =
          std::max(title_width, display_width(fit(one_line(check.title), kMaxTitleWidth)));
    }
    const size_t status_width = std::string("not recorded").size();
    out += "\n  " + pad("check", title_width) + "  " + pad("status", status_width) + "  result\n";
    for (const Check& check : result.checks) {
      out += "  " + pad(fit(one_line(check.title), kMaxTitleWidth), title_width) + "  " +
             paint(pad(compare::to_string(check.status), status_width), check.status, color) +
             "  " + result_line(check) + "\n";
    }
  }

  if (!result.diagnoses.empty()) out += "\n";
  for (const compare::Diagnosis& diagnosis : result.diagnoses) {
    out += "  diagnosis " + one_line(diagnosis.pitfall) + "  " + one_line(diagnosis.title) +
           " · fix: " + one_line(diagnosis.fix) + "\n";
  }
  return out;
}

}  // namespace parity::reports
