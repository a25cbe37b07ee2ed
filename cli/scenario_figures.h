// The figures a scenario case's comparison computed (parity/common/observed_figures.h), named
// for the case files' fact-checks and conditions:
//   verdict, diagnoses, headline           texts ("not equivalent", "P2, P11" or "none")
//   replicas_a, processes_a, replicas_b, _b  each run's devices (ranks) and processes
//   steps                                  the steps compared
//   first_divergent_step                   the loss check's first failing step ("none")
//   first_failing_step                     the first step any failing check failed at
//   loss_a.first, loss_a.last, loss_b.*    run A's (the engine's) and run B's mean loss
//   loss_ratio.first, .last                loss A / loss B
//   loss_gap.first, .last, .mean           loss B - loss A over the steps (finite ones)
//   loss_gap.spread, .spread_pct           max |gap - mean gap|, and that as a percentage of
//                                          |loss_gap.first|: how nearly constant the offset is
//   loss_a.mean_abs_change, loss_b.*       the mean |loss(t+1) - loss(t)|: how it oscillates
//   grad_norm_ratio.first, .last, .max     gradient norm A / B (recorded per step)
//   grad_norm_ratio.step_N                 at each step N the series holds
//   nonfinite_losses_a, _b                 steps whose loss is NaN or infinite
//   replica_spread_a.max, _b.max           the widest spread of one step's replica losses
//   test_loss_a, test_accuracy_a, _b       what each run evaluated on the test split at its end
//                                          (with BatchNorm's running statistics), when it did
//   CHECK.FIGURE                           every figure of every check, e.g.
//                                          loss_curve.max_abs_error, gradients.global_norm_ratio
#pragma once

#include "parity/common/observed_figures.h"
#include "parity/compare/result.h"

namespace parity::cli {

ObservedFigures comparison_figures(const compare::ComparisonResult& result);

}  // namespace parity::cli
