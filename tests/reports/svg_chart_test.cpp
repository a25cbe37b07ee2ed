// Axes with nice ticks, and the SVG charts built on them: empty series, non-finite values, zeros
// on a log axis, long series, bars. Every SVG must parse as XML.
#include "svg_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>

#include "axis.h"
#include "report_test_util.h"
#include "test_files.h"

namespace parity::reports {
namespace {

using testing::count_of;
using testing::expect_well_formed_xml;
using testing::TempDir;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> iota(size_t count, double first = 1) {
  std::vector<double> values;
  for (size_t i = 0; i < count; ++i) values.push_back(first + static_cast<double>(i));
  return values;
}

TEST(ReportAxis, LinearTicksAreNiceNumbersCoveringTheData) {
  // A span of 1.81 over 5 intervals is 0.36 each: the nice step is 0.5.
  const Axis axis = linear_axis(0.4797, 2.2891, 6);
  EXPECT_DOUBLE_EQ(axis.min, 0);
  EXPECT_DOUBLE_EQ(axis.max, 2.5);
  EXPECT_EQ(axis.tick_labels, (std::vector<std::string>{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5"}));

  const Axis small = linear_axis(3e-5, 1.15e-4, 5);
  EXPECT_EQ(small.tick_labels,
            (std::vector<std::string>{"2e-5", "4e-5", "6e-5", "8e-5", "1.0e-4", "1.2e-4"}));

  const Axis steps = linear_axis(1, 200, 7);
  EXPECT_EQ(steps.tick_labels, (std::vector<std::string>{"0", "50", "100", "150", "200"}));
  EXPECT_DOUBLE_EQ(steps.fraction(100), 0.5);
}

TEST(ReportAxis, LinearAxisWidensAnEmptyRange) {
  const Axis around_eight = linear_axis(8, 8, 5);
  EXPECT_LT(around_eight.min, 8);
  EXPECT_GT(around_eight.max, 8);
  const Axis around_zero = linear_axis(0, 0, 5);
  EXPECT_LT(around_zero.min, 0);
  EXPECT_GT(around_zero.max, 0);
  EXPECT_EQ(around_zero.tick_labels[around_zero.tick_labels.size() / 2], "0.0");
}

TEST(ReportAxis, LogTicksAreWholeDecades) {
  const Axis axis = log_axis(3e-8, 0.84, 6);
  EXPECT_TRUE(axis.log);
  EXPECT_DOUBLE_EQ(axis.min, 1e-8);
  EXPECT_DOUBLE_EQ(axis.max, 1);
  EXPECT_EQ(axis.tick_labels.front(), "10⁻⁸");
  EXPECT_EQ(axis.tick_labels.back(), "1");
  EXPECT_LE(axis.ticks.size(), 6u);
  EXPECT_DOUBLE_EQ(axis.fraction(1e-4), 0.5);

  const Axis one_decade = log_axis(2e-3, 5e-3, 6);
  EXPECT_EQ(one_decade.tick_labels, (std::vector<std::string>{"0.001", "0.01"}));

  // Twelve decades with at most 6 ticks: every third decade.
  const Axis wide = log_axis(1e-12, 0.5, 6);
  EXPECT_EQ(wide.tick_labels, (std::vector<std::string>{"10⁻¹²", "10⁻⁹", "10⁻⁶", "0.001", "1"}));
}

TEST(ReportSvgChart, EmptySeriesSaysNoDataInsteadOfAPlot) {
  LineChart spec;
  spec.title = "Loss";
  spec.lines = {{"A", "#000", {}}};
  const Chart chart = render_line_chart(spec);
  EXPECT_TRUE(chart.svg.empty());
  ASSERT_FALSE(chart.notes.empty());
  EXPECT_NE(chart.notes.front().find("No data"), std::string::npos);

  BarChart bars;
  bars.title = "Memory";
  const Chart no_bars = render_bar_chart(bars);
  EXPECT_TRUE(no_bars.svg.empty());
  EXPECT_NE(no_bars.notes.front().find("No data"), std::string::npos);
}

TEST(ReportSvgChart, NonFiniteValuesBreakTheLineAndAreMarked) {
  TempDir dir;
  LineChart spec;
  spec.title = "Loss <A> & B";
  spec.x_label = "step";
  spec.y_label = "loss";
  spec.x = iota(10);
  spec.lines = {{"A <run>", "#2f6fdf", {1, 2, 3, kNaN, 5, kInf, 7, 8, -kInf, 10}}};
  const Chart chart = render_line_chart(spec);
  expect_well_formed_xml(chart.svg, dir.path(), "chart.svg");
  EXPECT_FALSE(std::regex_search(chart.svg, std::regex("[ML\"]-?(nan|inf)")));
  EXPECT_NE(chart.svg.find("Loss &lt;A&gt; &amp; B"), std::string::npos);
  // Three gaps: the path restarts (M) after each, four segments in all.
  std::smatch path;
  ASSERT_TRUE(std::regex_search(
      chart.svg, path, std::regex("<path d=\"(M[^\"]*)\" fill=\"none\" stroke=\"#2f6fdf\"")));
  EXPECT_EQ(count_of(path[1].str(), "M"), 4u);
  ASSERT_EQ(chart.notes.size(), 1u);
  EXPECT_NE(chart.notes[0].find("3 values are not finite"), std::string::npos) << chart.notes[0];
  EXPECT_NE(chart.notes[0].find("first at step 4"), std::string::npos) << chart.notes[0];
  EXPECT_EQ(chart.legend.back().kind, LegendEntry::Kind::kMarker);
}

TEST(ReportSvgChart, ZerosOnALogAxisSitOnTheFloorAndAreNoted) {
  TempDir dir;
  LineChart spec;
  spec.title = "|Δloss|";
  spec.x_label = "step";
  spec.log_y = true;
  spec.x = iota(5);
  spec.lines = {{"|Δloss|", "#7048c8", {0, 1e-7, 0, 3e-6, 2e-5}}};
  spec.band = LineSeries{"tolerance", "#1f9d55", {1e-5, 1e-5, 1e-5, 1e-5, 1e-5}};
  const Chart chart = render_line_chart(spec);
  expect_well_formed_xml(chart.svg, dir.path(), "chart.svg");
  ASSERT_EQ(chart.notes.size(), 1u);
  // One decade below the smallest positive value (1e-7).
  EXPECT_NE(chart.notes[0].find("2 values are 0 or below, drawn on the axis floor (10⁻⁸)"),
            std::string::npos)
      << chart.notes[0];
  EXPECT_EQ(chart.legend.size(), 2u);
  EXPECT_EQ(chart.legend[1].kind, LegendEntry::Kind::kArea);
}

TEST(ReportSvgChart, AllZerosOnALogAxisSayWhyThereIsNoPlot) {
  LineChart spec;
  spec.log_y = true;
  spec.x = iota(3);
  spec.lines = {{"spread", "#000", {0, 0, 0}}};
  const Chart chart = render_line_chart(spec);
  EXPECT_TRUE(chart.svg.empty());
  EXPECT_NE(chart.notes.front().find("Every value is 0"), std::string::npos);
}

TEST(ReportSvgChart, ReferenceLineIsInsideTheAxis) {
  LineChart spec;
  spec.x = iota(4);
  spec.lines = {{"ratio", "#000", {8, 8, 8, 8}}};
  spec.reference_y = 1;
  const Chart chart = render_line_chart(spec);
  // The axis reaches below 1 (with its margin, down to 0), so the dashed rule lies inside it.
  EXPECT_NE(chart.svg.find(">0</text>"), std::string::npos);
  EXPECT_NE(chart.svg.find("stroke-dasharray=\"2 3\""), std::string::npos);
}

TEST(ReportSvgChart, LongSeriesAreThinnedToThePixelColumns) {
  LineChart spec;
  spec.x = iota(100000);
  std::vector<double> values;
  for (double x : spec.x) values.push_back(std::sin(x / 500) + (x == 50000 ? 5 : 0));
  spec.lines = {{"A", "#000", values}};
  const Chart chart = render_line_chart(spec);
  // About 500 pixel columns, at most 4 points each, instead of 100000 points.
  EXPECT_LT(chart.svg.size(), 40'000u);
  EXPECT_EQ(chart.svg.find("<circle"), std::string::npos);  // no dots on long series
  // The one-step spike (5 where the rest stays within ±1) survives the thinning: a point lies in
  // the top half of the plot (view y below 125; the plot spans y 14 to 236).
  double highest = 1e9;
  const std::regex point("[ML][0-9.]+ ([0-9.]+)");
  for (auto it = std::sregex_iterator(chart.svg.begin(), chart.svg.end(), point);
       it != std::sregex_iterator(); ++it) {
    highest = std::min(highest, std::stod((*it)[1].str()));
  }
  EXPECT_LT(highest, 125);
}

TEST(ReportSvgChart, BarsStartAtZeroAndLabelTheirValues) {
  TempDir dir;
  BarChart spec;
  spec.title = "Throughput";
  spec.y_label = "samples/s";
  spec.categories = {"throughput"};
  spec.series = {{"A", "#2f6fdf", {9880.6}}, {"B", "#e07b24", {7709.4}}};
  const Chart chart = render_bar_chart(spec);
  expect_well_formed_xml(chart.svg, dir.path(), "bars.svg");
  EXPECT_EQ(count_of(chart.svg, "<rect"), 2u);
  EXPECT_NE(chart.svg.find(">9881<"), std::string::npos);
  EXPECT_NE(chart.svg.find(">0<"), std::string::npos);
  EXPECT_TRUE(chart.notes.empty());
}

TEST(ReportSvgChart, MissingBarsAreNoted) {
  BarChart spec;
  spec.categories = {"0", "1", "2"};
  spec.series = {{"A", "#000", {1, 2, 3}}, {"B", "#111", {1}}};
  const Chart chart = render_bar_chart(spec);
  EXPECT_EQ(count_of(chart.svg, "<rect"), 4u);
  ASSERT_EQ(chart.notes.size(), 1u);
  EXPECT_EQ(chart.notes[0], "B: no finite value for 2 of 3 bars.");
}

}  // namespace
}  // namespace parity::reports
