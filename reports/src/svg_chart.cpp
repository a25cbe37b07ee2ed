#include "svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "axis.h"
#include "escape.h"
#include "number_format.h"

namespace parity::reports {
namespace {

// The SVG's own coordinate system; the page scales it to its width (viewBox).
constexpr double kViewWidth = 560;
constexpr double kViewHeight = 280;

constexpr const char* kTextColor = "#4b5563";
constexpr const char* kGridColor = "#e5e7eb";
constexpr const char* kAxisColor = "#9ca3af";
constexpr const char* kNonFiniteColor = "#dc2626";

// Series with at most this many points also get a dot per point.
constexpr size_t kMaxPointsWithDots = 50;

struct Point {
  double x = 0;
  double y = 0;
};
using Segment = std::vector<Point>;  // a run of finite values, drawn as one polyline

// The rectangle inside the axes, in view coordinates.
struct PlotArea {
  double left = 60;
  double top = 14;
  double right = kViewWidth - 14;
  double bottom = kViewHeight - 44;

  double width() const { return right - left; }
  double height() const { return bottom - top; }
  double x_of(const Axis& axis, double value) const {
    return left + axis.fraction(value) * width();
  }
  double y_of(const Axis& axis, double value) const {
    return bottom - axis.fraction(value) * height();
  }
};

std::string coordinate(double value) { return fmt::format("{:.1f}", value); }

std::string svg_open(const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" role=\"img\" "
      "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\" "
      "font-size=\"11\"><title>{}</title>",
      kViewWidth, kViewHeight, markup_escape(title));
}

// Horizontal grid lines with their labels on the left, the y-axis title rotated beside them.
std::string y_axis_markup(const Axis& axis, const PlotArea& plot, const std::string& label) {
  std::string out;
  for (size_t i = 0; i < axis.ticks.size(); ++i) {
    const std::string y = coordinate(plot.y_of(axis, axis.ticks[i]));
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>",
                       coordinate(plot.left), y, coordinate(plot.right), y, kGridColor);
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\" "
        "fill=\"{}\">{}</text>",
        coordinate(plot.left - 6), y, kTextColor, markup_escape(axis.tick_labels[i]));
  }
  const double middle = (plot.top + plot.bottom) / 2;
  out += fmt::format(
      "<text transform=\"translate(13 {}) rotate(-90)\" text-anchor=\"middle\" fill=\"{}\">{}"
      "</text>",
      coordinate(middle), kTextColor, markup_escape(label));
  return out;
}

// Tick marks and labels under the plot at `positions` (view x), the x-axis title below them,
// and the axis lines.
std::string x_axis_markup(const std::vector<std::pair<double, std::string>>& positions,
                          const PlotArea& plot, const std::string& label) {
  std::string out;
  for (const auto& [x, text] : positions) {
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>",
                       coordinate(x), coordinate(plot.bottom), coordinate(plot.bottom + 4),
                       kAxisColor);
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                    coordinate(x), coordinate(plot.bottom + 16), kTextColor, markup_escape(text));
  }
  if (!label.empty()) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                       coordinate((plot.left + plot.right) / 2), coordinate(kViewHeight - 8),
                       kTextColor, markup_escape(label));
  }
  out += fmt::format("<path d=\"M{0} {1}V{2}H{3}\" fill=\"none\" stroke=\"{4}\"/>",
                     coordinate(plot.left), coordinate(plot.top), coordinate(plot.bottom),
                     coordinate(plot.right), kAxisColor);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Line charts.

// What one series holds, for the axis range and the notes.
struct SeriesStats {
  double min = std::numeric_limits<double>::infinity();  // of the plottable values
  double max = -std::numeric_limits<double>::infinity();
  size_t num_plottable = 0;
  size_t num_non_finite = 0;
  size_t first_non_finite = 0;  // index, valid when num_non_finite > 0
  size_t num_not_positive = 0;  // finite values a log axis cannot show
};

using SeriesWithStats = std::vector<std::pair<const LineSeries*, SeriesStats>>;

SeriesStats series_stats(const std::vector<double>& values, size_t num_points, bool log) {
  SeriesStats stats;
  for (size_t i = 0; i < num_points; ++i) {
    const double value = values[i];
    if (!std::isfinite(value)) {
      if (stats.num_non_finite++ == 0) stats.first_non_finite = i;
    } else if (log && value <= 0) {
      ++stats.num_not_positive;
    } else {
      stats.min = std::min(stats.min, value);
      stats.max = std::max(stats.max, value);
      ++stats.num_plottable;
    }
  }
  return stats;
}

// The view-coordinate segments of one series: a non-finite value ends a segment. Points that
// fall into one pixel column are thinned to that column's first, lowest, highest and last
// point, in step order.
std::vector<Segment> trace(const std::vector<double>& x, const std::vector<double>& values,
                           size_t num_points, const Axis& x_axis, const Axis& y_axis,
                           const PlotArea& plot) {
  std::vector<Segment> segments(1);
  std::vector<std::pair<size_t, Point>> column;  // the current pixel column's points
  const auto flush_column = [&] {
    if (column.empty()) return;
    const auto by_y = [](const auto& a, const auto& b) { return a.second.y < b.second.y; };
    std::vector<std::pair<size_t, Point>> kept = {
        column.front(), *std::min_element(column.begin(), column.end(), by_y),
        *std::max_element(column.begin(), column.end(), by_y), column.back()};
    std::sort(kept.begin(), kept.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t k = 0; k < kept.size(); ++k) {
      if (k == 0 || kept[k].first != kept[k - 1].first) segments.back().push_back(kept[k].second);
    }
    column.clear();
  };
  for (size_t i = 0; i < num_points; ++i) {
    if (!std::isfinite(values[i])) {
      flush_column();
      if (!segments.back().empty()) segments.emplace_back();
      continue;
    }
    // A log axis draws values it cannot show (0) on its floor.
    const double value = y_axis.log ? std::max(values[i], y_axis.min) : values[i];
    const Point point{plot.x_of(x_axis, x[i]), plot.y_of(y_axis, value)};
    if (!column.empty() && std::floor(column.back().second.x) != std::floor(point.x)) {
      flush_column();
    }
    column.emplace_back(i, point);
  }
  flush_column();
  if (segments.back().empty()) segments.pop_back();
  return segments;
}

std::string path_data(const std::vector<Segment>& segments) {
  std::string d;
  for (const Segment& segment : segments) {
    for (size_t i = 0; i < segment.size(); ++i) {
      d += fmt::format("{}{} {}", i == 0 ? "M" : "L", coordinate(segment[i].x),
                       coordinate(segment[i].y));
    }
    // A lone point between gaps: a zero-length line, drawn as a dot by the round line cap.
    if (segment.size() == 1) d += "h0";
  }
  return d;
}

std::string line_markup(const LineSeries& series, const std::vector<Segment>& segments,
                        size_t num_points) {
  std::string out = fmt::format(
      "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.75\" "
      "stroke-linejoin=\"round\" stroke-linecap=\"round\"{}><title>{}</title></path>",
      path_data(segments), series.color, series.dashed ? " stroke-dasharray=\"5 3\"" : "",
      markup_escape(series.label));
  if (num_points <= kMaxPointsWithDots) {
    for (const Segment& segment : segments) {
      for (const Point& point : segment) {
        out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.25\" fill=\"{}\"/>",
                           coordinate(point.x), coordinate(point.y), series.color);
      }
    }
  }
  return out;
}

// The area between the plot's bottom and the band's values, with its upper edge drawn.
std::string band_markup(const LineSeries& band, const std::vector<Segment>& segments,
                        const PlotArea& plot) {
  std::string area;
  for (const Segment& segment : segments) {
    area += fmt::format("M{} {}", coordinate(segment.front().x), coordinate(plot.bottom));
    for (const Point& point : segment) {
      area += fmt::format("L{} {}", coordinate(point.x), coordinate(point.y));
    }
    area += fmt::format("L{} {}Z", coordinate(segment.back().x), coordinate(plot.bottom));
  }
  return fmt::format(
      "<path d=\"{0}\" fill=\"{1}\" fill-opacity=\"0.13\" stroke=\"none\"/>"
      "<path d=\"{2}\" fill=\"none\" stroke=\"{1}\" stroke-opacity=\"0.7\" stroke-width=\"1\">"
      "<title>{3}</title></path>",
      area, band.color, path_data(segments), markup_escape(band.label));
}

// Runs of consecutive steps where some series is not finite, as index ranges [first, last].
std::vector<std::pair<size_t, size_t>> non_finite_spans(const SeriesWithStats& all,
                                                        size_t num_points) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < num_points; ++i) {
    const bool non_finite = std::any_of(all.begin(), all.end(), [&](const auto& entry) {
      const std::vector<double>& values = entry.first->values;
      return i < values.size() && !std::isfinite(values[i]);
    });
    if (!non_finite) continue;
    if (!spans.empty() && spans.back().second + 1 == i) {
      spans.back().second = i;
    } else {
      spans.emplace_back(i, i);
    }
  }
  return spans;
}

// Each run of non-finite steps: a faint red band across the plot and a red triangle on the top
// edge where it starts.
std::string non_finite_markup(const std::vector<std::pair<size_t, size_t>>& spans,
                              const std::vector<double>& x, const Axis& x_axis,
                              const PlotArea& plot) {
  std::string out;
  for (const auto& [first, last] : spans) {
    const double left = plot.x_of(x_axis, x[first]) - 1;
    const double right = plot.x_of(x_axis, x[last]) + 1;
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.08\"/>"
        "<path d=\"M{} {}H{}L{} {}Z\" fill=\"{}\"/>",
        coordinate(left), coordinate(plot.top), coordinate(right - left), coordinate(plot.height()),
        kNonFiniteColor, coordinate(left - 3), coordinate(plot.top), coordinate(left + 5),
        coordinate(left + 1), coordinate(plot.top + 7), kNonFiniteColor);
  }
  return out;
}

std::string plural(size_t count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// Labelled x ticks for a linear axis.
std::vector<std::pair<double, std::string>> x_ticks(const Axis& axis, const PlotArea& plot) {
  std::vector<std::pair<double, std::string>> positions;
  for (size_t i = 0; i < axis.ticks.size(); ++i) {
    positions.emplace_back(plot.x_of(axis, axis.ticks[i]), axis.tick_labels[i]);
  }
  return positions;
}

// One note per series with non-finite values: how many, and from which step.
std::vector<std::string> non_finite_notes(const SeriesWithStats& all, const LineChart& spec) {
  std::vector<std::string> notes;
  for (const auto& [series, stats] : all) {
    if (stats.num_non_finite == 0) continue;
    notes.push_back(fmt::format(
        "{}: {} not finite (NaN or infinite), the first at {} {}. The line breaks there, on a "
        "red shade with a mark on the top edge.",
        series->label, plural(stats.num_non_finite, "value is", "values are"), spec.x_label,
        format_number(spec.x[stats.first_non_finite])));
  }
  return notes;
}

// The y axis over the plottable data.
//   log      values it cannot show sit on a floor one decade below the smallest positive value,
//            apart from the real data; a band gets that decade too, or it would be a sliver.
//   linear   a margin of 4% of the data's span on either side (not below 0 for data that is
//            not negative), so that a line on a nice number does not run along the frame.
Axis value_axis(const LineChart& spec, double data_min, double data_max, bool any_not_positive) {
  if (spec.log_y) {
    return log_axis(any_not_positive || spec.band ? data_min / 10 : data_min, data_max, 6);
  }
  const double margin = 0.04 * (data_max - data_min);
  const double low = data_min >= 0 ? std::max(0.0, data_min - margin) : data_min - margin;
  return linear_axis(low, data_max + margin, 6);
}

Chart no_data(const std::string& title, std::vector<std::string> notes) {
  Chart chart;
  chart.title = title;
  chart.notes = std::move(notes);
  return chart;
}

}  // namespace

Chart render_line_chart(const LineChart& spec) {
  const size_t num_points = spec.x.size();
  if (num_points == 0) return no_data(spec.title, {"No data: neither run recorded a step."});

  // Every series (the band included) with its statistics; the band is drawn first.
  SeriesWithStats all;
  if (spec.band) all.emplace_back(&*spec.band, SeriesStats{});
  for (const LineSeries& line : spec.lines) all.emplace_back(&line, SeriesStats{});
  double data_min = std::numeric_limits<double>::infinity();
  double data_max = -data_min;
  bool any_not_positive = false;
  for (auto& [series, stats] : all) {
    stats = series_stats(series->values, std::min(num_points, series->values.size()), spec.log_y);
    data_min = std::min(data_min, stats.min);
    data_max = std::max(data_max, stats.max);
    any_not_positive = any_not_positive || stats.num_not_positive > 0;
  }
  if (spec.reference_y) {
    data_min = std::min(data_min, *spec.reference_y);
    data_max = std::max(data_max, *spec.reference_y);
  }

  Chart chart;
  chart.title = spec.title;
  chart.notes = non_finite_notes(all, spec);
  if (!std::isfinite(data_min)) {
    chart.notes.insert(chart.notes.begin(), spec.log_y && any_not_positive
                                                ? "Every value is 0: nothing to show on a log axis."
                                                : "No finite value to plot.");
    return chart;
  }

  const Axis y_axis = value_axis(spec, data_min, data_max, any_not_positive);
  if (spec.log_y) {
    for (const auto& [series, stats] : all) {
      if (stats.num_not_positive == 0) continue;
      chart.notes.push_back(
          fmt::format("{}: {} 0 or below, drawn on the axis floor ({}); a log axis cannot show 0.",
                      series->label, plural(stats.num_not_positive, "value is", "values are"),
                      y_axis.tick_labels.front()));
    }
  }
  // A single step gets a step of room on either side.
  const bool one_step = spec.x.back() <= spec.x.front();
  const Axis x_axis = one_step ? linear_axis(spec.x.front() - 1, spec.x.front() + 1, 3)
                               : linear_axis(spec.x.front(), spec.x.back(), 7);
  const PlotArea plot;

  std::string svg = svg_open(spec.title);
  svg += y_axis_markup(y_axis, plot, spec.y_label);
  svg += x_axis_markup(x_ticks(x_axis, plot), plot, spec.x_label);
  if (spec.reference_y) {
    const std::string y = coordinate(plot.y_of(y_axis, *spec.reference_y));
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-dasharray=\"2 3\"/>",
        coordinate(plot.left), y, coordinate(plot.right), y, kTextColor);
  }
  for (const auto& [series, stats] : all) {
    const size_t count = std::min(num_points, series->values.size());
    const auto segments = trace(spec.x, series->values, count, x_axis, y_axis, plot);
    const bool is_band = spec.band && series == &*spec.band;
    svg += is_band ? band_markup(*series, segments, plot) : line_markup(*series, segments, count);
  }
  const auto spans = non_finite_spans(all, num_points);
  svg += non_finite_markup(spans, spec.x, x_axis, plot);

  for (const LineSeries& line : spec.lines) {
    chart.legend.push_back(
        {line.label, line.color,
         line.dashed ? LegendEntry::Kind::kDashedLine : LegendEntry::Kind::kLine});
  }
  if (spec.band) {
    chart.legend.push_back({spec.band->label, spec.band->color, LegendEntry::Kind::kArea});
  }
  if (!spans.empty()) {
    chart.legend.push_back({"not finite", kNonFiniteColor, LegendEntry::Kind::kMarker});
  }
  chart.svg = svg + "</svg>";
  return chart;
}

// ---------------------------------------------------------------------------------------------
// Bar charts.

Chart render_bar_chart(const BarChart& spec) {
  const size_t num_categories = spec.categories.size();
  double data_max = 0;
  size_t num_bars = 0;
  Chart chart;
  chart.title = spec.title;
  for (const BarSeries& series : spec.series) {
    size_t num_missing = 0;
    for (size_t c = 0; c < num_categories; ++c) {
      const double value =
          c < series.values.size() ? series.values[c] : std::numeric_limits<double>::quiet_NaN();
      if (std::isfinite(value)) {
        data_max = std::max(data_max, value);
        ++num_bars;
      } else {
        ++num_missing;
      }
    }
    if (num_missing > 0) {
      chart.notes.push_back(fmt::format("{}: no finite value for {} of {}.", series.label,
                                        num_missing, plural(num_categories, "bar", "bars")));
    }
    chart.legend.push_back({series.label, series.color, LegendEntry::Kind::kBar});
  }
  if (num_bars == 0) {
    chart.legend.clear();
    chart.notes = {"No data: neither run recorded a value."};
    return chart;
  }

  const Axis y_axis = linear_axis(0, data_max, 5);
  const PlotArea plot;
  const double group_width = plot.width() / static_cast<double>(num_categories);
  const double bar_width =
      std::min(56.0, group_width * 0.7 / static_cast<double>(spec.series.size()));
  // Values over the bars only where a bar is wide enough for one.
  const bool label_values = bar_width >= 34;
  // Label at most about 12 categories; with more, every k-th.
  const size_t label_stride = (num_categories + 11) / 12;

  std::string svg = svg_open(spec.title);
  svg += y_axis_markup(y_axis, plot, spec.y_label);
  std::vector<std::pair<double, std::string>> category_ticks;
  for (size_t c = 0; c < num_categories; ++c) {
    const double group_center = plot.left + (static_cast<double>(c) + 0.5) * group_width;
    if (c % label_stride == 0) category_ticks.emplace_back(group_center, spec.categories[c]);
    const double first_left =
        group_center - bar_width * static_cast<double>(spec.series.size()) / 2;
    for (size_t s = 0; s < spec.series.size(); ++s) {
      const BarSeries& series = spec.series[s];
      if (c >= series.values.size() || !std::isfinite(series.values[c])) continue;
      const double value = series.values[c];
      const double top = plot.y_of(y_axis, value);
      const double left = first_left + bar_width * static_cast<double>(s);
      svg += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" rx=\"1.5\">"
          "<title>{}: {}</title></rect>",
          coordinate(left + 1), coordinate(top), coordinate(bar_width - 2),
          coordinate(plot.bottom - top), series.color,
          markup_escape(series.label + ", " + spec.categories[c]), format_number(value));
      if (label_values) {
        svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                           coordinate(left + bar_width / 2), coordinate(top - 4), kTextColor,
                           format_number(value));
      }
    }
  }
  svg += x_axis_markup(category_ticks, plot, spec.x_label);
  chart.svg = svg + "</svg>";
  return chart;
}

// ---------------------------------------------------------------------------------------------
// Dot charts.

namespace {

// The finite values a dot chart shows: every point, centre and interval end, the band and the
// reference; the count of points left out.
struct DotExtent {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  size_t left_out = 0;

  void add(double value) {
    if (!std::isfinite(value)) {
      ++left_out;
      return;
    }
    min = std::min(min, value);
    max = std::max(max, value);
  }
  void add(const std::optional<double>& value) {
    if (value) add(*value);
  }
};

DotExtent dot_extent(const DotChart& spec) {
  DotExtent extent;
  for (const DotRow& row : spec.rows) {
    for (double point : row.points) extent.add(point);
    extent.add(row.center);
    extent.add(row.interval_low);
    extent.add(row.interval_high);
  }
  extent.add(spec.band_low);
  extent.add(spec.band_high);
  extent.add(spec.reference_x);
  return extent;
}

std::string dot_row_markup(const DotRow& row, double y, const Axis& axis, const PlotArea& plot) {
  std::string out = fmt::format(
      "<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>", coordinate(plot.left + 4),
      coordinate(y - 14), kTextColor, markup_escape(row.label));
  if (row.interval_low && row.interval_high && std::isfinite(*row.interval_low) &&
      std::isfinite(*row.interval_high)) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"3\" "
        "stroke-linecap=\"round\"><title>{4}: interval [{5}, {6}]</title></line>",
        coordinate(plot.x_of(axis, *row.interval_low)),
        coordinate(plot.x_of(axis, *row.interval_high)), coordinate(y), row.color,
        markup_escape(row.label), format_number(*row.interval_low),
        format_number(*row.interval_high));
  }
  for (double point : row.points) {
    if (!std::isfinite(point)) continue;
    out += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.55\" "
        "stroke=\"{}\"><title>{}: {}</title></circle>",
        coordinate(plot.x_of(axis, point)), coordinate(y), row.color, row.color,
        markup_escape(row.label), format_number(point));
  }
  if (row.center && std::isfinite(*row.center)) {
    const std::string x = coordinate(plot.x_of(axis, *row.center));
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" "
        "stroke-width=\"2.5\"><title>{4}: {5}</title></line>",
        x, coordinate(y - 9), coordinate(y + 9), row.color, markup_escape(row.label),
        format_number(*row.center));
  }
  return out;
}

}  // namespace

Chart render_dot_chart(const DotChart& spec) {
  Chart chart;
  chart.title = spec.title;
  const DotExtent extent = dot_extent(spec);
  if (extent.left_out > 0) {
    chart.notes.push_back(fmt::format("{} left out: not finite (NaN or infinite).",
                                      plural(extent.left_out, "value is", "values are")));
  }
  if (spec.rows.empty() || !std::isfinite(extent.min)) {
    chart.notes.insert(chart.notes.begin(), "No finite value to plot.");
    return chart;
  }
  const double margin = 0.06 * (extent.max - extent.min);
  const Axis axis = linear_axis(extent.min - margin, extent.max + margin, 6);
  const PlotArea plot;

  std::string svg = svg_open(spec.title);
  for (size_t i = 0; i < axis.ticks.size(); ++i) {  // vertical grid lines
    const std::string x = coordinate(plot.x_of(axis, axis.ticks[i]));
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>", x,
                       coordinate(plot.top), coordinate(plot.bottom), kGridColor);
  }
  if (spec.band_low && spec.band_high) {
    const double left = plot.x_of(axis, *spec.band_low);
    const double right = plot.x_of(axis, *spec.band_high);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.13\">"
        "<title>{}</title></rect>",
        coordinate(left), coordinate(plot.top), coordinate(right - left),
        coordinate(plot.height()), spec.band_color, markup_escape(spec.band_label));
    chart.legend.push_back({spec.band_label, spec.band_color, LegendEntry::Kind::kArea});
  }
  if (spec.reference_x) {
    const std::string x = coordinate(plot.x_of(axis, *spec.reference_x));
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" "
        "stroke-dasharray=\"2 3\"/>",
        x, coordinate(plot.top), coordinate(plot.bottom), kTextColor);
  }
  const double row_height = plot.height() / static_cast<double>(spec.rows.size());
  for (size_t r = 0; r < spec.rows.size(); ++r) {
    const double y = plot.top + row_height * (static_cast<double>(r) + 0.5) + 7;
    svg += dot_row_markup(spec.rows[r], y, axis, plot);
    chart.legend.push_back({spec.rows[r].label, spec.rows[r].color, LegendEntry::Kind::kMarker});
  }
  svg += x_axis_markup(x_ticks(axis, plot), plot, spec.x_label);
  chart.svg = svg + "</svg>";
  return chart;
}

}  // namespace parity::reports
