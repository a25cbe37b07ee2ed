// The terminal summary: verdict, headline, one aligned line per check, one per diagnosis; ANSI
// colours only when asked, and none smuggled in through input.
#include <gtest/gtest.h>

#include <sstream>

#include "parity/reports/reports.h"
#include "sample_results.h"

namespace parity::reports {
namespace {

using testing::failing_result;
using testing::passing_result;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ReportTerminalSummary, ShowsVerdictChecksAndDiagnoses) {
  const std::string text = render_terminal_summary(failing_result(), false);
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 15u) << text;
  EXPECT_EQ(lines[0], "parity: NOT EQUIVALENT");
  EXPECT_EQ(lines[1].rfind("  The runs part at step 1", 0), 0u);
  EXPECT_EQ(lines[3], "  check                 status        result");
  EXPECT_EQ(lines[4],
            "  Loss curve            fail          Loss differs beyond tolerance from step 1; A is "
            "NaN from step 150.");
  EXPECT_EQ(lines[5],
            "  Gradients             fail          Gradient norms are 8.00× B's at every recorded "
            "step a|b.");
  EXPECT_EQ(lines[7].rfind("  Single-device oracle  not recorded  Neither run recorded", 0), 0u);
  EXPECT_EQ(lines[14].rfind("  diagnosis P2  Gradients summed, not averaged · fix: Reduce", 0), 0u);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);  // input's escape sequence is neutralized
  EXPECT_EQ(text.find('\x07'), std::string::npos);
}

TEST(ReportTerminalSummary, ColorsStatusesOnlyWhenAsked) {
  const std::string plain = render_terminal_summary(passing_result(), false);
  const std::string colored = render_terminal_summary(passing_result(), true);
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
  EXPECT_NE(colored.find("\x1b[32mpass"), std::string::npos);
  EXPECT_NE(colored.find("\x1b[1m\x1b[32mEQUIVALENT\x1b[0m"), std::string::npos);
  EXPECT_EQ(lines_of(plain).size(), lines_of(colored).size());
}

TEST(ReportTerminalSummary, KeepsLongAndMultiLineStringsOnOneLine) {
  compare::ComparisonResult result = passing_result();
  result.checks[0].title = std::string(40, 'x') + "\nsecond line";
  const auto lines = lines_of(render_terminal_summary(result, false));
  EXPECT_EQ(lines[4].rfind("  " + std::string(27, 'x') + "…  pass", 0), 0u) << lines[4];
  EXPECT_EQ(lines.size(), lines_of(render_terminal_summary(passing_result(), false)).size());
}

TEST(ReportTerminalSummary, CutsALongResultToOneLineWithAnEllipsis) {
  compare::ComparisonResult result = passing_result();
  result.checks[0].summary = std::string(150, 'y');
  const auto lines = lines_of(render_terminal_summary(result, false));
  // 99 code points of the summary and the ellipsis: kMaxResultWidth is 100.
  const std::string expected_end = std::string(99, 'y') + "…";
  ASSERT_GE(lines[4].size(), expected_end.size());
  EXPECT_EQ(lines[4].substr(lines[4].size() - expected_end.size()), expected_end) << lines[4];
}

}  // namespace
}  // namespace parity::reports
