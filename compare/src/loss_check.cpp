// The loss curve: the global loss and, when both runs recorded them with the same replica count,
// every replica's loss, at each step both runs recorded. A step is bad when any of them falls
// outside the tolerance; up to tolerance.allowed_bad_steps bad steps warn (the approximate lane),
// more fail.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "checks.h"
#include "figures.h"
#include "parity/compare/tolerance.h"

namespace parity::compare {
namespace {

double replica_spread(const std::vector<double>& losses) {
  if (losses.empty()) return 0;
  const auto [low, high] = std::minmax_element(losses.begin(), losses.end());
  return *high - *low;
}

struct LossStats {
  double max_abs = 0;
  double max_rel = 0;
  int64_t worst_step = 0;
  double max_replica_abs = 0;
  int64_t replica_steps_compared = 0;
  std::vector<int64_t> bad_steps;
  std::vector<std::string> bad_step_details;  // for the first few bad steps
};

constexpr size_t kDetailedBadSteps = 5;

// Compares one step's global and replica losses; a step with any outside tolerance is bad.
void compare_step(const StepPair& pair, const Tolerance& tolerance, LossStats& stats) {
  const double a = pair.a->loss;
  const double b = pair.b->loss;
  const double difference = std::abs(a - b);
  if (!std::isnan(difference) && difference > stats.max_abs) {
    stats.max_abs = difference;
    stats.worst_step = pair.step();
  }
  if (!std::isnan(difference)) stats.max_rel = std::max(stats.max_rel, difference / std::abs(b));
  std::vector<std::string> problems;
  if (!is_close(a, b, tolerance.rtol, tolerance.atol)) {
    problems.push_back(
        fmt::format("loss A {} vs B {} (|diff| {}, allowed {})", a, b, format_number(difference),
                    format_number(allowed_difference(b, tolerance.rtol, tolerance.atol))));
  }
  const std::vector<double>& replicas_a = pair.a->replica_losses;
  const std::vector<double>& replicas_b = pair.b->replica_losses;
  if (!replicas_a.empty() && replicas_a.size() == replicas_b.size()) {
    ++stats.replica_steps_compared;
    for (size_t r = 0; r < replicas_a.size(); ++r) {
      const double replica_difference = std::abs(replicas_a[r] - replicas_b[r]);
      stats.max_replica_abs = std::max(stats.max_replica_abs, replica_difference);
      if (!is_close(replicas_a[r], replicas_b[r], tolerance.rtol, tolerance.atol)) {
        problems.push_back(
            fmt::format("replica {} loss A {} vs B {}", r, replicas_a[r], replicas_b[r]));
      }
    }
  }
  if (problems.empty()) return;
  stats.bad_steps.push_back(pair.step());
  if (stats.bad_step_details.size() < kDetailedBadSteps) {
    std::string line = fmt::format("step {}: {}", pair.step(), problems.front());
    if (problems.size() > 1) line += fmt::format(" (and {} more)", problems.size() - 1);
    stats.bad_step_details.push_back(line);
  }
}

void add_series_point(const StepPair& pair, const Tolerance& tolerance, StepSeries& series) {
  series.steps.push_back(pair.step());
  series.loss_a.push_back(pair.a->loss);
  series.loss_b.push_back(pair.b->loss);
  series.loss_abs_diff.push_back(std::abs(pair.a->loss - pair.b->loss));
  series.loss_tolerance.push_back(allowed_difference(pair.b->loss, tolerance.rtol, tolerance.atol));
  series.grad_norm_ratio.push_back(ratio_of(pair.a->grad_norm, pair.b->grad_norm));
  series.replica_spread_a.push_back(replica_spread(pair.a->replica_losses));
  series.replica_spread_b.push_back(replica_spread(pair.b->replica_losses));
}

// Steps one run has and the other lacks: expected when a run stopped early, suspicious otherwise.
void add_unpaired_steps(const RunPair& runs, Check& check) {
  if (!runs.only_a.empty()) {
    check.details.push_back(
        fmt::format("{} step(s) only in run A: {}", runs.only_a.size(), format_steps(runs.only_a)));
  }
  if (!runs.only_b.empty()) {
    check.details.push_back(
        fmt::format("{} step(s) only in run B: {}", runs.only_b.size(), format_steps(runs.only_b)));
  }
  const bool unpaired = !runs.only_a.empty() || !runs.only_b.empty();
  if (unpaired && check.status == CheckStatus::kPass) check.status = CheckStatus::kWarn;
}

}  // namespace

Check check_loss_curve(const RunPair& runs, const Tolerance& tolerance, StepSeries& series,
                       Findings& findings) {
  Check check;
  check.id = "loss_curve";
  check.title = "Loss curve";
  if (runs.common.empty()) {
    // Nothing compared is never a pass: the verdict must not call such runs equivalent.
    check.status = CheckStatus::kFail;
    check.summary = fmt::format("No step recorded by both runs (A: {} steps, B: {} steps).",
                                runs.a.steps.size(), runs.b.steps.size());
    return check;
  }

  LossStats stats;
  for (const StepPair& pair : runs.common) {
    compare_step(pair, tolerance, stats);
    add_series_point(pair, tolerance, series);
  }
  const auto num_steps = static_cast<int64_t>(runs.common.size());
  const auto num_bad = static_cast<int64_t>(stats.bad_steps.size());
  check.figures = {
      {"steps_compared", static_cast<double>(num_steps), ""},
      {"max_abs_error", stats.max_abs, ""},
      {"max_rel_error", stats.max_rel, ""},
      {"steps_out_of_tolerance", static_cast<double>(num_bad), ""},
      {"allowed_bad_steps", static_cast<double>(tolerance.allowed_bad_steps), ""},
  };
  if (stats.replica_steps_compared > 0) {
    check.figures.push_back({"max_replica_abs_error", stats.max_replica_abs, ""});
  } else {
    check.details.push_back(fmt::format("replica losses not compared: A recorded {} per step, B {}",
                                        runs.common.front().a->replica_losses.size(),
                                        runs.common.front().b->replica_losses.size()));
  }

  const std::string worst =
      fmt::format("worst |A - B| {} (relative {}) at step {}", format_number(stats.max_abs),
                  format_number(stats.max_rel), stats.worst_step);
  if (num_bad == 0) {
    check.status = CheckStatus::kPass;
    check.summary = fmt::format("All {} steps within tolerance; {}.", num_steps, worst);
  } else {
    findings.first_loss_mismatch = stats.bad_steps.front();
    const bool in_lane = num_bad <= tolerance.allowed_bad_steps;
    check.status = in_lane ? CheckStatus::kWarn : CheckStatus::kFail;
    if (!in_lane) check.first_failing_step = stats.bad_steps.front();
    check.summary =
        fmt::format("{} of {} steps outside tolerance ({} allowed), first at step {}; {}.", num_bad,
                    num_steps, tolerance.allowed_bad_steps, stats.bad_steps.front(), worst);
    check.details.insert(check.details.begin(), stats.bad_step_details.begin(),
                         stats.bad_step_details.end());
    check.details.push_back("steps outside tolerance: " + format_steps(stats.bad_steps, 20));
  }
  add_unpaired_steps(runs, check);
  return check;
}

}  // namespace parity::compare
