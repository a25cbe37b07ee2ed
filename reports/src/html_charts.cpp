#include "html_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "escape.h"
#include "number_format.h"
#include "svg_chart.h"

namespace parity::reports {
namespace {

using compare::ComparisonResult;
using compare::RunSummary;

// Blue and orange stay distinct under the common colour-vision deficiencies.
constexpr const char* kRunAColor = "#2f6fdf";
constexpr const char* kRunBColor = "#e07b24";
constexpr const char* kDifferenceColor = "#7048c8";
constexpr const char* kToleranceColor = "#1f9d55";

// "A · pmap_engine"
std::string run_label(const RunSummary& run) {
  return run.producer.empty() ? run.label : run.label + " · " + run.producer;
}

std::vector<double> steps_as_x(const ComparisonResult& result) {
  return {result.series.steps.begin(), result.series.steps.end()};
}

Chart loss_chart(const ComparisonResult& result) {
  LineChart spec;
  spec.title = "Loss";
  spec.x_label = "step";
  spec.y_label = "loss (mean over replicas)";
  spec.x = steps_as_x(result);
  // B, the reference, dashed on top: where the runs agree both stay visible.
  spec.lines = {{run_label(result.a), kRunAColor, result.series.loss_a},
                {run_label(result.b), kRunBColor, result.series.loss_b, true}};
  return render_line_chart(spec);
}

Chart loss_difference_chart(const ComparisonResult& result) {
  const compare::Tolerance& tolerance = result.loss_tolerance;
  LineChart spec;
  spec.title = "Loss difference against the tolerance (log scale)";
  spec.x_label = "step";
  spec.y_label = "|loss A − loss B|";
  spec.log_y = true;
  spec.x = steps_as_x(result);
  spec.lines = {{"|Δloss|", kDifferenceColor, result.series.loss_abs_diff}};
  spec.band = LineSeries{fmt::format("tolerance: atol {} + rtol {} × |loss B|",
                                     format_number(tolerance.atol), format_number(tolerance.rtol)),
                         kToleranceColor, result.series.loss_tolerance};
  return render_line_chart(spec);
}

Chart gradient_ratio_chart(const ComparisonResult& result) {
  LineChart spec;
  spec.title = "Gradient-norm ratio";
  spec.x_label = "step";
  spec.y_label = "‖grad A‖ / ‖grad B‖";
  spec.x = steps_as_x(result);
  spec.lines = {{"A / B", kRunAColor, result.series.grad_norm_ratio}};
  spec.reference_y = 1;
  return render_line_chart(spec);
}

bool all_zero(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double value) { return value == 0; });
}

Chart replica_divergence_chart(const ComparisonResult& result) {
  const compare::StepSeries& series = result.series;
  const char* title = "Divergence between replicas (log scale)";
  if (!series.steps.empty() && all_zero(series.replica_spread_a) &&
      all_zero(series.replica_spread_b)) {
    return {title,
            "",
            {},
            {"Replica losses agree exactly at every step in both runs, or were "
             "not recorded."}};
  }
  LineChart spec;
  spec.title = title;
  spec.x_label = "step";
  spec.y_label = "max − min replica loss";
  spec.log_y = true;
  spec.x = steps_as_x(result);
  spec.lines = {{run_label(result.a), kRunAColor, series.replica_spread_a},
                {run_label(result.b), kRunBColor, series.replica_spread_b, true}};
  return render_line_chart(spec);
}

Chart throughput_chart(const ComparisonResult& result) {
  BarChart spec;
  spec.title = "Throughput";
  spec.y_label = "samples/s (steady state)";
  spec.categories = {"throughput"};
  spec.series = {{run_label(result.a), kRunAColor, {result.a.samples_per_second}},
                 {run_label(result.b), kRunBColor, {result.b.samples_per_second}}};
  return render_bar_chart(spec);
}

Chart memory_chart(const ComparisonResult& result) {
  const auto& a = result.a.peak_bytes_per_replica;
  const auto& b = result.b.peak_bytes_per_replica;
  int64_t largest = 0;
  for (const auto* peaks : {&a, &b}) {
    for (int64_t bytes : *peaks) largest = std::max(largest, bytes);
  }
  // One binary unit for the whole axis, the largest that keeps the tallest bar at 1 or more.
  constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double scale = 1;
  while (unit < 4 && static_cast<double>(largest) >= scale * 1024) {
    scale *= 1024;
    ++unit;
  }
  const size_t num_replicas = std::max(a.size(), b.size());
  const auto scaled = [&](const std::vector<int64_t>& peaks) {
    std::vector<double> values(num_replicas, std::numeric_limits<double>::quiet_NaN());
    for (size_t i = 0; i < peaks.size(); ++i) values[i] = static_cast<double>(peaks[i]) / scale;
    return values;
  };
  BarChart spec;
  spec.title = "Peak memory per replica";
  spec.x_label = "replica";
  spec.y_label = fmt::format("peak memory ({})", kUnits[unit]);
  for (size_t i = 0; i < num_replicas; ++i) spec.categories.push_back(std::to_string(i));
  spec.series = {{run_label(result.a), kRunAColor, scaled(a)},
                 {run_label(result.b), kRunBColor, scaled(b)}};
  return render_bar_chart(spec);
}

std::string legend_html(const std::vector<LegendEntry>& legend) {
  if (legend.empty()) return "";
  std::string out = "<ul class=\"legend\">";
  for (const LegendEntry& entry : legend) {
    const char* kind = "line";
    switch (entry.kind) {
      case LegendEntry::Kind::kLine:
        kind = "line";
        break;
      case LegendEntry::Kind::kDashedLine:
        kind = "dashed";
        break;
      case LegendEntry::Kind::kArea:
        kind = "area";
        break;
      case LegendEntry::Kind::kBar:
        kind = "bar";
        break;
      case LegendEntry::Kind::kMarker:
        kind = "marker";
        break;
    }
    out += fmt::format(
        "<li><span class=\"swatch {}\" style=\"color:{}\" aria-hidden=\"true\"></span>{}</li>",
        kind, entry.color, markup_escape(entry.label));
  }
  return out + "</ul>";
}

std::string figure_html(const Chart& chart) {
  std::string out = fmt::format("<figure class=\"chart\"><figcaption>{}</figcaption>{}",
                                markup_escape(chart.title), legend_html(chart.legend));
  size_t first_note = 0;
  if (chart.svg.empty()) {
    // Nothing to plot: the first note says why, in place of the plot.
    out += fmt::format("<div class=\"no-data\">{}</div>",
                       markup_escape(chart.notes.empty() ? "No data." : chart.notes.front()));
    first_note = 1;
  } else {
    out += chart.svg;
  }
  for (size_t i = first_note; i < chart.notes.size(); ++i) {
    out += fmt::format("<p class=\"chart-note\">{}</p>", markup_escape(chart.notes[i]));
  }
  return out + "</figure>";
}

// Every seed's value of each producer, with its mean.
Chart seed_values_chart(const ComparisonResult& result, const compare::SeedDistribution& d) {
  DotChart spec;
  spec.title = fmt::format("{}: each seed's run", d.title);
  spec.x_label = d.title;
  spec.rows = {{run_label(result.a), kRunAColor, d.values_a, d.mean_a, {}, {}},
               {run_label(result.b), kRunBColor, d.values_b, d.mean_b, {}, {}}};
  Chart chart = render_dot_chart(spec);
  chart.notes.push_back(fmt::format("A dot per seed ({} of A, {} of B), the tall tick the mean.",
                                    d.values_a.size(), d.values_b.size()));
  return chart;
}

// The difference of the means with its interval against the equivalence margin: TOST says
// equivalent exactly when the interval lies inside the shaded band.
Chart seed_difference_chart(const compare::SeedDistribution& d) {
  DotChart spec;
  spec.title = fmt::format("{}: difference of means, A − B ({})", d.title, d.verdict);
  spec.x_label = fmt::format("mean A − mean B, {:.0f}% interval", d.confidence * 100);
  DotRow row{"A − B", kDifferenceColor, {}, d.mean_a - d.mean_b, d.interval_low,
             d.interval_high};
  spec.rows = {row};
  spec.band_low = -d.margin;
  spec.band_high = d.margin;
  spec.band_label = fmt::format("equivalence margin ±{}", format_number(d.margin));
  spec.band_color = kToleranceColor;
  spec.reference_x = 0;
  return render_dot_chart(spec);
}

}  // namespace

std::string seed_charts_html(const ComparisonResult& result) {
  std::string out = "<div class=\"charts\">";
  for (const compare::SeedDistribution& d : result.seed_distributions) {
    out += figure_html(seed_values_chart(result, d));
    out += figure_html(seed_difference_chart(d));
  }
  return out + "</div>";
}

std::string charts_html(const ComparisonResult& result) {
  std::string out = "<div class=\"charts\">";
  for (const Chart& chart :
       {loss_chart(result), loss_difference_chart(result), gradient_ratio_chart(result),
        replica_divergence_chart(result), throughput_chart(result), memory_chart(result)}) {
    out += figure_html(chart);
  }
  return out + "</div>";
}

}  // namespace parity::reports
