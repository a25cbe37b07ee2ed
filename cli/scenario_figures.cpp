#include "scenario_figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

namespace parity::cli {
namespace {

using compare::StepSeries;

void add_first_and_last(ObservedFigures& figures, const std::string& name,
                        const std::vector<double>& values) {
  if (values.empty()) return;
  figures.set(name + ".first", values.front());
  figures.set(name + ".last", values.back());
}

// How much the loss moves from one step to the next, on average: how much it oscillates.
void add_mean_abs_change(ObservedFigures& figures, const std::string& name,
                         const std::vector<double>& values) {
  if (values.size() < 2) return;
  double total = 0;
  for (size_t i = 1; i < values.size(); ++i) total += std::abs(values[i] - values[i - 1]);
  figures.set(name + ".mean_abs_change", total / static_cast<double>(values.size() - 1));
}

// The offset loss_b - loss_a over the steps: at the first and the last, and how far it strays
// from its mean (max |gap - mean|), also as a percentage of the first step's gap. A loss
// offset that is nearly constant (M11's label smoothing) is told by a small spread.
void add_loss_gap(ObservedFigures& figures, const StepSeries& series) {
  std::vector<double> gaps;
  for (size_t i = 0; i < series.loss_a.size() && i < series.loss_b.size(); ++i) {
    const double gap = series.loss_b[i] - series.loss_a[i];
    if (std::isfinite(gap)) gaps.push_back(gap);
  }
  if (gaps.empty()) return;
  add_first_and_last(figures, "loss_gap", gaps);
  double mean = 0;
  for (const double gap : gaps) mean += gap;
  mean /= static_cast<double>(gaps.size());
  double spread = 0;
  for (const double gap : gaps) spread = std::max(spread, std::abs(gap - mean));
  figures.set("loss_gap.mean", mean);
  figures.set("loss_gap.spread", spread);
  if (gaps.front() != 0) figures.set("loss_gap.spread_pct", 100 * spread / std::abs(gaps.front()));
}

void add_series(ObservedFigures& figures, const StepSeries& series) {
  figures.set("steps", static_cast<double>(series.steps.size()));
  add_first_and_last(figures, "loss_a", series.loss_a);
  add_first_and_last(figures, "loss_b", series.loss_b);
  std::vector<double> loss_ratio;
  for (size_t i = 0; i < series.loss_a.size(); ++i) {
    loss_ratio.push_back(series.loss_a[i] / series.loss_b[i]);
  }
  add_first_and_last(figures, "loss_ratio", loss_ratio);
  add_loss_gap(figures, series);
  add_mean_abs_change(figures, "loss_a", series.loss_a);
  add_mean_abs_change(figures, "loss_b", series.loss_b);
  add_first_and_last(figures, "grad_norm_ratio", series.grad_norm_ratio);
  if (!series.grad_norm_ratio.empty()) {
    figures.set("grad_norm_ratio.max",
                *std::max_element(series.grad_norm_ratio.begin(), series.grad_norm_ratio.end()));
  }
  for (size_t i = 0; i < series.steps.size(); ++i) {
    figures.set(fmt::format("grad_norm_ratio.step_{}", series.steps[i]),
                series.grad_norm_ratio[i]);
  }
  const auto non_finite = [](const std::vector<double>& values) {
    return static_cast<double>(
        std::count_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }));
  };
  figures.set("nonfinite_losses_a", non_finite(series.loss_a));
  figures.set("nonfinite_losses_b", non_finite(series.loss_b));
  if (!series.replica_spread_a.empty()) {
    figures.set("replica_spread_a.max", *std::max_element(series.replica_spread_a.begin(),
                                                          series.replica_spread_a.end()));
    figures.set("replica_spread_b.max", *std::max_element(series.replica_spread_b.begin(),
                                                          series.replica_spread_b.end()));
  }
}

}  // namespace

ObservedFigures comparison_figures(const compare::ComparisonResult& result) {
  ObservedFigures figures;
  figures.set_text("verdict", compare::to_string(result.verdict));
  std::vector<std::string> ids;
  for (const compare::Diagnosis& diagnosis : result.diagnoses) ids.push_back(diagnosis.pitfall);
  figures.set_text("diagnoses", ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", ")));
  figures.set_text("headline", result.headline);
  figures.set_text("first_divergent_step", "none");
  figures.set_text("first_failing_step", "none");
  std::optional<int64_t> first_failing;
  for (const compare::Check& check : result.checks) {
    if (check.id == "loss_curve" && check.first_failing_step) {
      figures.set("first_divergent_step", static_cast<double>(*check.first_failing_step));
    }
    if (check.status == compare::CheckStatus::kFail && check.first_failing_step) {
      first_failing = std::min(first_failing.value_or(*check.first_failing_step),
                               *check.first_failing_step);
    }
  }
  if (first_failing) figures.set("first_failing_step", static_cast<double>(*first_failing));
  // What each run evaluated at its end: test_loss_a, test_accuracy_b, ...
  for (const auto& [run, summary] : {std::pair{"a", &result.a}, std::pair{"b", &result.b}}) {
    for (const char* name : {"test_loss", "test_accuracy"}) {
      const auto found = summary->results.find(name);
      if (found != summary->results.end()) {
        figures.set(fmt::format("{}_{}", name, run), found->second);
      }
    }
  }
  figures.set("replicas_a", static_cast<double>(result.a.replicas));
  figures.set("processes_a", static_cast<double>(result.a.processes));
  figures.set("replicas_b", static_cast<double>(result.b.replicas));
  figures.set("processes_b", static_cast<double>(result.b.processes));
  add_series(figures, result.series);
  for (const compare::Check& check : result.checks) {
    for (const compare::Figure& figure : check.figures) {
      figures.set(check.id + "." + figure.name, figure.value);
    }
  }
  return figures;
}

}  // namespace parity::cli
