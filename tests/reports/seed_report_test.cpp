// The reports of a comparison over seeds (parity run --seeds): the distributions in
// report.json, the dot charts in report.html in place of the step charts, the final values in
// report.md, a JUnit test case per final value, and the dot chart itself.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "parity/reports/reports.h"
#include "report_test_util.h"
#include "sample_results.h"
#include "svg_chart.h"
#include "test_files.h"

namespace parity::reports {
namespace {

using testing::contains;
using testing::count_of;
using testing::seeds_result;

TEST(SeedReport, JsonHoldsEachSeedsValueAndTheInterval) {
  const nlohmann::json report = nlohmann::json::parse(render_json(seeds_result()));
  EXPECT_EQ(report.at("verdict"), "inconclusive");
  const nlohmann::json& seeds = report.at("seeds");
  ASSERT_EQ(seeds.size(), 2u);
  EXPECT_EQ(seeds[0].at("metric"), "test_loss");
  EXPECT_EQ(seeds[0].at("values_a").size(), 4u);
  EXPECT_EQ(seeds[0].at("seeds_a")[3], testing::kScript);
  EXPECT_DOUBLE_EQ(seeds[0].at("interval_low"), -0.0069);
  EXPECT_DOUBLE_EQ(seeds[1].at("margin"), 0.01);
  EXPECT_EQ(seeds[1].at("verdict"), "inconclusive");
}

TEST(SeedReport, HtmlShowsTheDistributionsInsteadOfTheStepCharts) {
  testing::TempDir dir;
  const std::string html = render_html(seeds_result());
  testing::expect_well_formed_xml(html, dir.path(), "report.html");
  EXPECT_TRUE(contains(html, "<h2>Over seeds</h2>"));
  EXPECT_FALSE(contains(html, "<h2>Step by step</h2>"));
  EXPECT_FALSE(contains(html, "<h2>Tolerances</h2>"));
  EXPECT_TRUE(contains(html, "4 seeds of A and 4 of B compared"));
  // Two charts per final value: the seeds' dots, and the difference against the margin.
  EXPECT_EQ(count_of(html, "<svg"), 4u);
  EXPECT_TRUE(contains(html, "Test accuracy: difference of means, A − B (inconclusive)"));
  EXPECT_TRUE(contains(html, "equivalence margin ±0.01"));
  EXPECT_FALSE(contains(html, testing::kScript));  // the hostile seed label, escaped
}

TEST(SeedReport, MarkdownListsTheFinalValuesAndJunitHasACasePerValue) {
  const std::string markdown = render_markdown(seeds_result());
  EXPECT_TRUE(contains(markdown, "### Over seeds"));
  EXPECT_TRUE(contains(markdown,
                       "Test loss: A 0.767, B 0.768, difference -0.001, 90% interval \\[-0.0069, "
                       "0.0066\\], margin ±0.02: equivalent"));
  EXPECT_FALSE(contains(markdown, "### Tolerances"));
  const std::string junit = render_junit(seeds_result());
  EXPECT_TRUE(contains(junit, "name=\"seeds_test_loss\""));
  EXPECT_TRUE(contains(junit, "name=\"seeds_test_accuracy\""));
}

TEST(SeedReport, DotChartDrawsEveryPointTheIntervalAndTheBand) {
  DotChart spec;
  spec.title = "difference";
  spec.x_label = "A − B";
  spec.rows = {{"A − B", "#000", {0.01, 0.02}, 0.015, 0.005, 0.025}};
  spec.band_low = -0.02;
  spec.band_high = 0.02;
  spec.band_label = "margin";
  spec.band_color = "#0a0";
  spec.reference_x = 0;
  const Chart chart = render_dot_chart(spec);
  EXPECT_EQ(count_of(chart.svg, "<circle"), 2u);
  EXPECT_TRUE(contains(chart.svg, "A − B: interval [0.005, 0.025]"));
  EXPECT_TRUE(contains(chart.svg, "<rect"));  // the band
  EXPECT_TRUE(contains(chart.svg, "stroke-dasharray=\"2 3\""));  // the reference at 0
  EXPECT_TRUE(chart.notes.empty());
}

TEST(SeedReport, DotChartLeavesOutNonFiniteValuesWithANote) {
  DotChart spec;
  spec.title = "values";
  spec.rows = {{"A", "#000", {0.5, std::nan(""), 0.6}, {}, {}, {}}};
  const Chart chart = render_dot_chart(spec);
  EXPECT_EQ(count_of(chart.svg, "<circle"), 2u);
  ASSERT_EQ(chart.notes.size(), 1u);
  EXPECT_TRUE(contains(chart.notes[0], "1 value is left out"));

  spec.rows = {{"A", "#000", {std::nan("")}, {}, {}, {}}};
  const Chart empty = render_dot_chart(spec);
  EXPECT_TRUE(empty.svg.empty());
  EXPECT_EQ(empty.notes.front(), "No finite value to plot.");
}

}  // namespace
}  // namespace parity::reports
