// report.md: the verdict, one table row per check, diagnoses, runs; input strings escaped so
// that none breaks a table or turns into markup.
#include <gtest/gtest.h>

#include "parity/reports/reports.h"
#include "report_test_util.h"
#include "sample_results.h"

namespace parity::reports {
namespace {

using testing::contains;
using testing::failing_result;
using testing::num_cells;
using testing::passing_result;
using testing::table_rows;

constexpr const char* kChecksHeader = "| status | check | result | first failing step |";

TEST(MarkdownReport, HasOneRowPerCheckWithFourCells) {
  for (const auto& result : {passing_result(), failing_result()}) {
    const std::string markdown = render_markdown(result);
    const auto rows = table_rows(markdown, kChecksHeader);
    ASSERT_EQ(rows.size(), result.checks.size()) << markdown;
    for (const std::string& row : rows) EXPECT_EQ(num_cells(row), 4u) << row;
  }
}

TEST(MarkdownReport, StartsWithTheVerdictAndListsTheDiagnosis) {
  const std::string markdown = render_markdown(failing_result());
  EXPECT_EQ(markdown.rfind("## ❌ parity: not equivalent\n", 0), 0u);
  EXPECT_TRUE(contains(markdown, "### Diagnosis\n\n- **P2 · Gradients summed, not averaged.**"));
  EXPECT_TRUE(contains(markdown, "| ❌ fail | Loss curve |"));
  EXPECT_TRUE(contains(markdown, "| ➖ not recorded | Single-device oracle |"));
  EXPECT_TRUE(contains(markdown, "| ⚠️ warn | Random numbers |"));
  EXPECT_TRUE(contains(markdown, "<details><summary>Gradients: fail</summary>"));
  EXPECT_TRUE(contains(markdown, "| norm ratio | 8× |"));
  EXPECT_TRUE(contains(markdown, "3 fail, 1 warn, 1 not recorded, 4 pass"));
  EXPECT_EQ(render_markdown(passing_result()).rfind("## ✅ parity: equivalent\n", 0), 0u);
}

TEST(MarkdownReport, EscapesInputStrings) {
  const std::string markdown = render_markdown(failing_result());
  EXPECT_FALSE(contains(markdown, "<script>"));
  EXPECT_TRUE(contains(markdown, "&lt;script\\>alert(1)&lt;/script\\>"));
  EXPECT_TRUE(contains(markdown, "a\\|b"));
  EXPECT_TRUE(contains(markdown, "Q&amp;A"));
  EXPECT_TRUE(contains(markdown, "\\*bold\\* \\_it\\_ \\[link\\](http://x) \\`code\\`"));
  EXPECT_TRUE(contains(markdown, "multi line detail"));
  EXPECT_FALSE(contains(markdown, "\x07"));
  EXPECT_FALSE(contains(markdown, "\x1b"));
  // The runs table keeps three cells per row whatever the directory holds.
  for (const std::string& row :
       table_rows(markdown, "|  | run A (under test) | run B (reference) |")) {
    EXPECT_EQ(num_cells(row), 3u) << row;
  }
}

TEST(MarkdownReport, MarksRunFieldsThatShouldMatch) {
  compare::ComparisonResult result = passing_result();
  result.b.case_hash = "different";
  EXPECT_TRUE(contains(render_markdown(result), "| case hash ⚠️ |"));
  EXPECT_FALSE(contains(render_markdown(passing_result()), "⚠️ |"));
}

// The runs table shows each run's style and what each replica holds, side by side.
TEST(MarkdownReport, ShowsTheStylesAndWhatEachReplicaHolds) {
  const std::string markdown = render_markdown(passing_result());
  EXPECT_TRUE(contains(markdown, "| parallel style | jit-fsdp | ddp |")) << markdown;
  EXPECT_TRUE(contains(markdown,
                       "| params + optimizer state per replica | 298.2 KiB (params 99.4 KiB + "
                       "optimizer state 198.8 KiB) | 2.33 MiB (params 795 KiB + optimizer state "
                       "1.55 MiB) |"))
      << markdown;
  EXPECT_TRUE(contains(markdown, "uneven leaves replicated (no dimension divides by 8): "
                                 "dense1.bias \\[10\\] | DDP: a full copy on every rank |"));
}

}  // namespace
}  // namespace parity::reports
