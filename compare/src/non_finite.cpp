// The first non-finite number of a run: where a precision or overflow problem (pitfall P10) shows
// first. Every step of each run is scanned, not only those both recorded: the run that blew up
// usually stopped there. Both producers stop *before* recording a step whose loss or reduced
// gradient is not finite, marking the run incomplete with a failure that says so ("step 3: the
// loss is not finite on rank 2 ..."); such a run's first non-finite step is the one after its last
// recorded step.
#include <fmt/format.h>

#include <cmath>

#include "checks.h"
#include "figures.h"

namespace parity::compare {
namespace {

std::optional<NonFinite> first_in_run(const std::string& label, const RunDir& run) {
  for (const StepMetrics& metrics : run.steps) {
    if (!std::isfinite(metrics.loss)) {
      return NonFinite{label, metrics.step, "the loss is " + format_number(metrics.loss)};
    }
    for (size_t r = 0; r < metrics.replica_losses.size(); ++r) {
      const double loss = metrics.replica_losses[r];
      if (!std::isfinite(loss)) {
        return NonFinite{label, metrics.step,
                         fmt::format("replica {}'s loss is {}", r, format_number(loss))};
      }
    }
    if (!std::isfinite(metrics.grad_norm)) {
      return NonFinite{label, metrics.step,
                       "the gradient norm is " + format_number(metrics.grad_norm)};
    }
  }
  const RunInfo& info = run.info;
  if (info.status == "incomplete" && info.failure.find("not finite") != std::string::npos) {
    const int64_t step = run.steps.empty() ? 0 : run.steps.back().step + 1;
    return NonFinite{label, step, "the run stopped: " + trim_right(info.failure)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<NonFinite> find_first_non_finite(const RunPair& runs) {
  const std::optional<NonFinite> a = first_in_run("A", runs.a);
  const std::optional<NonFinite> b = first_in_run("B", runs.b);
  if (a && (!b || a->step <= b->step)) return a;
  return b;
}

}  // namespace parity::compare
