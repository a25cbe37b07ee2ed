// report.html: self-contained, well-formed, every input string escaped, every section present,
// and charts that degrade to notes (no data, non-finite values) rather than break.
#include <gtest/gtest.h>

#include "parity/reports/reports.h"
#include "report_test_util.h"
#include "sample_results.h"
#include "test_files.h"

namespace parity::reports {
namespace {

using testing::contains;
using testing::count_of;
using testing::failing_result;
using testing::passing_result;
using testing::TempDir;

TEST(HtmlReport, IsWellFormedAndLoadsNothing) {
  TempDir dir;
  for (const auto& result : {passing_result(), failing_result()}) {
    const std::string html = render_html(result);
    testing::expect_well_formed_xml(html, dir.path(), "report.html");
    EXPECT_TRUE(contains(html, "<meta name=\"viewport\""));
    EXPECT_TRUE(contains(html, "@media print"));
    // No script, no external stylesheet, font, image or link.
    for (const char* load :
         {"<script", "<link", "src=", "href=", "url(", "@import", "@font-face"}) {
      EXPECT_FALSE(contains(html, load)) << load;
    }
  }
}

TEST(HtmlReport, EscapesEveryInputString) {
  const std::string html = render_html(failing_result());
  EXPECT_FALSE(contains(html, testing::kScript));
  EXPECT_TRUE(contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_TRUE(contains(html, "Q&amp;A"));
  EXPECT_FALSE(contains(html, "Q&A"));
  EXPECT_TRUE(contains(html, "bell\\x07here"));
  EXPECT_FALSE(contains(html, "\x07"));
  EXPECT_FALSE(contains(html, "\x1b"));
  EXPECT_FALSE(contains(html, "\xff"));
  EXPECT_TRUE(contains(html, "]]&gt;"));
}

TEST(HtmlReport, ShowsVerdictDiagnosesChecksChartsAndRunsInThatOrder) {
  const std::string html = render_html(failing_result());
  const size_t badge = html.find("class=\"badge\"");
  const size_t diagnosis = html.find("<h2>Diagnosis</h2>");
  const size_t checks = html.find("<h2>Checks</h2>");
  const size_t charts = html.find("<h2>Step by step</h2>");
  const size_t runs = html.find("<h2>Runs</h2>");
  const size_t versions = html.find("<h2>Versions</h2>");
  ASSERT_NE(badge, std::string::npos);
  EXPECT_LT(badge, diagnosis);
  EXPECT_LT(diagnosis, checks);
  EXPECT_LT(checks, charts);
  EXPECT_LT(charts, runs);
  EXPECT_LT(runs, versions);
  EXPECT_TRUE(contains(html, "not equivalent</div>"));
  EXPECT_TRUE(contains(html, "tone-fail"));
  EXPECT_TRUE(contains(html, "Gradients summed, not averaged"));
  EXPECT_TRUE(contains(html, ">P2<"));
  // One tbody per check, its figures and worst tensors.
  EXPECT_EQ(count_of(html, "<tbody id=\"check-"), 9u);
  EXPECT_TRUE(contains(html, "<dt>norm ratio</dt><dd>8×</dd>"));
  EXPECT_TRUE(contains(html, "<td class=\"name\">layers.0.weight</td>"));
  EXPECT_TRUE(contains(html, "<dd>NaN</dd>"));
  EXPECT_TRUE(contains(html, "<dd>inf</dd>"));
  // The six charts, each an SVG in a figure.
  EXPECT_EQ(count_of(html, "<svg "), 6u);
  EXPECT_TRUE(contains(html, "not finite (NaN or infinite), the first at step 150"));
  EXPECT_TRUE(contains(html, "1.3e-6"));
  EXPECT_TRUE(contains(html, "libtorch"));
}

// The runs table holds each run's style and what each replica holds, side by side.
TEST(HtmlReport, ShowsTheStylesAndWhatEachReplicaHolds) {
  const std::string html = render_html(passing_result());
  EXPECT_TRUE(contains(html, "<tr><th scope=\"row\">parallel style</th><td>jit-fsdp</td>"
                             "<td>ddp</td></tr>"));
  EXPECT_TRUE(contains(html, "<tr><th scope=\"row\">params + optimizer state per replica</th>"
                             "<td>298.2 KiB (params 99.4 KiB + optimizer state 198.8 KiB)</td>"
                             "<td>2.33 MiB (params 795 KiB + optimizer state 1.55 MiB)</td></tr>"));
}

TEST(HtmlReport, PassingResultHasNoDiagnosisSection) {
  const std::string html = render_html(passing_result());
  EXPECT_TRUE(contains(html, "tone-pass"));
  EXPECT_TRUE(contains(html, "equivalent</div>"));
  EXPECT_FALSE(contains(html, "<h2>Diagnosis</h2>"));
  // A zero |Δloss| at step 1 on the log chart is noted, not dropped.
  EXPECT_TRUE(contains(html, "1 value is 0 or below, drawn on the axis floor"));
}

TEST(HtmlReport, EmptySeriesShowNoDataNotes) {
  TempDir dir;
  compare::ComparisonResult result = passing_result();
  result.verdict = compare::Verdict::kIncomplete;
  result.series = {};
  result.checks.clear();
  result.a.peak_bytes_per_replica.clear();
  result.b.peak_bytes_per_replica.clear();
  const std::string html = render_html(result);
  testing::expect_well_formed_xml(html, dir.path(), "report.html");
  EXPECT_TRUE(contains(html, "tone-warn"));
  EXPECT_TRUE(contains(html, "No check was run."));
  // Four line charts and the memory bars; throughput still has its two figures.
  EXPECT_EQ(count_of(html, "<div class=\"no-data\">No data"), 5u);
}

}  // namespace
}  // namespace parity::reports
