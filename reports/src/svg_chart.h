// Line, bar and dot charts as inline SVG, drawn in C++ (the report needs no script).
//
// A chart is the <svg> element (axes with nice ticks, grid, data) plus what the page shows
// around it: a legend and notes, which HTML lays out and wraps better than SVG text can. The SVG
// scales with its viewBox; every string in it is escaped.
//
// Values a plot cannot show are never dropped silently:
//   non-finite    NaN or ±inf break the line (a gap) and get a red marker on the plot's top edge;
//                 a note says how many and from which step.
//   not positive  a log axis has no 0: such values are drawn on the axis floor, one decade below
//                 the smallest positive value, and a note says so.
// Series of many steps are thinned to what a pixel column can show (its first, lowest, highest
// and last point), so a 100000-step run stays a small file and keeps its spikes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace parity::reports {

struct LineSeries {
  std::string label;
  std::string color;           // an SVG colour, e.g. "#2f6fdf"
  std::vector<double> values;  // one per x
  bool dashed = false;
};

struct LineChart {
  std::string title;
  std::string x_label;  // with the unit, e.g. "step"
  std::string y_label;  // with the unit, e.g. "|Δloss| (log scale)"
  bool log_y = false;
  std::vector<double> x;  // ascending
  std::vector<LineSeries> lines;
  // A shaded area from the bottom of the plot up to these values, e.g. a tolerance.
  std::optional<LineSeries> band;
  // A horizontal rule, e.g. ratio 1; the y axis always includes it.
  std::optional<double> reference_y;
};

struct BarSeries {
  std::string label;
  std::string color;
  std::vector<double> values;  // one per category; NaN where the series has none
};

struct BarChart {
  std::string title;
  std::string x_label;  // what the categories are, e.g. "replica"; may be empty
  std::string y_label;  // with the unit
  std::vector<std::string> categories;
  std::vector<BarSeries> series;  // bars of one category stand side by side
};

// Points on one horizontal value axis, a row each: e.g. every seed's final value of each
// producer, or the difference of their means with its confidence interval.
struct DotRow {
  std::string label;  // written above the row, inside the plot
  std::string color;
  std::vector<double> points;          // one dot each
  std::optional<double> center;        // a tall tick, e.g. the mean
  std::optional<double> interval_low;  // a bar from low to high, with `center`
  std::optional<double> interval_high;
};

struct DotChart {
  std::string title;
  std::string x_label;  // with the unit
  std::vector<DotRow> rows;
  // A shaded range across every row (e.g. an equivalence margin), with its legend label.
  std::optional<double> band_low, band_high;
  std::string band_label;
  std::string band_color;
  std::optional<double> reference_x;  // a vertical rule, e.g. a difference of 0
};

struct LegendEntry {
  enum class Kind { kLine, kDashedLine, kArea, kBar, kMarker };
  std::string label;
  std::string color;
  Kind kind = Kind::kLine;
};

struct Chart {
  std::string title;
  std::string svg;  // empty when there is nothing to plot; `notes` then says why
  std::vector<LegendEntry> legend;
  std::vector<std::string> notes;  // plain text, to be escaped by the page
};

Chart render_line_chart(const LineChart& spec);
Chart render_bar_chart(const BarChart& spec);
// Non-finite values are left out, with a note.
Chart render_dot_chart(const DotChart& spec);

}  // namespace parity::reports
