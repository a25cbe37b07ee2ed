// The oracle applied to tensors: the gradients, parameters and BatchNorm statistics that both
// runs and the oracle recorded, judged as the oracle check judges losses. The two f32 runs need
// not agree element for element where the arithmetic itself is ill-conditioned (a BatchNorm's
// scale gradient is a sum over the batch of terms that nearly cancel, so f32 loses a relative
// 1e-3 to 1e-2 of it whatever the order of the sum); what matters is that A is not markedly
// further from the higher-precision values than the reference is.
//
// Each group (grads, params, batch_stats) at each step is judged as a whole: A's worst tensor,
// by relative L2 distance from the oracle's, against factor x B's worst. Tensor by tensor, the
// ratio of two rounding errors crosses 2 by chance somewhere among a hundred tensors (measured
// on cnn-fmnist: 3 of 168 at 2.1-2.4x); the worst of each side is stable. A tensor of A within
// the tensor tolerance of the oracle's counts as exact.
//
// The worst tensors are often small (a BatchNorm's scale gradient: one value per channel, each
// a sum of nearly cancelling terms), and a relative L2 distance over N elements estimates the
// rounding's scale from N draws only: two such estimates of one scale, from N_A and N_B
// elements, stand in the ratio sqrt(F), F Fisher's F(N_A, N_B), whose 99.9% quantile is 2.3
// for 16 elements each and 1.1 for thousands. So A may reach factor x that quantile x B's worst:
// the factor allows for two implementations' accuracies, the quantile for how little a small
// tensor says of either (measured: cnn-fmnist's 16-channel Residual_0/BatchNorm_0/scale
// gradient at step 0 of the quick run, 0.0058 from the f64 oracle in the engine against 0.0025
// in ddp_ref on the AVX2 paths of OpenBLAS, ATen and oneDNN: 2.3x).
//
// Where the frameworks' arithmetic differs by design the band widens by how much
// (rounding_growth.h): sqrt(n) for BatchNorm statistics over n values, measured on cnn-fmnist at
// step 0 (8 x 32, n = 25088, sqrt(n) = 158), the engine against ddp_ref: worst gradient 11x as
// far from the f64 oracle, worst parameter 12x, worst statistic 430x (Intel AVX-512; OpenBLAS's
// Prescott kernels, its fallback for that model) and 480x (the AVX2 paths), all within
// 2 x 158 x the sampling spread.
//
// The band holds while rounding errors are small and grow alike in both runs. In a chaotic
// trajectory (a deep relu network trained for hundreds of steps) they grow until a run's
// tensors no longer estimate the oracle's at all: two unrelated tensors of equal norm lie
// sqrt(2) apart in relative L2, and which run gets there first is chance (measured on
// mlp4-1024 at step 199: B's worst 0.68, A's 1.43 for every engine style, the loss curves
// within the oracle's band throughout). A group-step where the reference itself is
// kTensorOracleHorizon or more from the oracle (among the tensors f32 can resolve, below) is
// past that horizon: its tensors carry no evidence either way, so it is reported and left to
// the loss, which the oracle check judges at every step.
//
// The gradients and parameters of a parameter without gradient signal (gradient_signal.h) are
// left out of both sides: zero in exact arithmetic, they follow each run's rounding noise.
#include <boost/math/distributions/fisher_f.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "checks.h"
#include "figures.h"

namespace parity::compare {
namespace {

struct Worst {
  double rel_l2 = 0;
  std::string name;
  size_t elements = 1;
};

// A NaN distance is the worst there is.
void note(Worst& worst, const TensorComparison& comparison) {
  const double rel_l2 = comparison.delta.rel_l2;
  if (rel_l2 > worst.rel_l2 || rel_l2 != rel_l2) {
    worst = {rel_l2, comparison.delta.name, std::max<size_t>(comparison.num_elements, 1)};
  }
}

// How far apart two estimates of one rounding scale, relative L2 distances over `a` and `b`
// elements, may stand by chance: sqrt of F(a, b)'s 99.9% quantile.
double sampling_spread(size_t a, size_t b) {
  const boost::math::fisher_f f(static_cast<double>(a), static_cast<double>(b));
  return std::sqrt(boost::math::quantile(f, kSamplingConfidence));
}

using GroupStep = std::pair<std::string, int64_t>;  // "grads", step

// Whether a group's tensor is left out: a parameter's gradient or value without signal.
bool left_out(const std::string& group, const std::string& name, const GradientSignal& signal) {
  return group != "batch_stats" && signal.lacks_signal(name);
}

// Each group's worst distance from the oracle at each step; `exact_within_tolerance` counts the
// tensors within the tensor tolerance as distance 0.
std::map<GroupStep, Worst> worst_distances(const TensorScan& scan, bool exact_within_tolerance,
                                           const GradientSignal& signal,
                                           TensorOracleJudgement* judgement) {
  std::map<GroupStep, Worst> worst;
  for (const auto& [group, tensors] : {std::pair{"grads", &scan.grads},
                                       std::pair{"params", &scan.params},
                                       std::pair{"batch_stats", &scan.batch_stats}}) {
    for (const TensorComparison& comparison : tensors->compared) {
      const TensorDelta& delta = comparison.delta;
      if (left_out(group, delta.name, signal)) {
        if (judgement != nullptr) ++judgement->without_signal;
        continue;
      }
      if (judgement != nullptr) ++judgement->judged;
      Worst& entry = worst[{group, delta.step}];
      if (exact_within_tolerance && delta.within_tolerance) continue;
      note(entry, comparison);
    }
  }
  return worst;
}

// Each group's worst distance from the oracle at each step among the tensors f32 can resolve:
// those whose oracle norm is at least f32's unit roundoff (2^-24) times the group's largest.
// A tensor that is zero in exact arithmetic (a key projection's bias and its gradient, which
// softmax cancels) has an oracle of rounding noise, and any f32 run is then 1e8 from it in
// relative terms, at every step, chaos or not; it says nothing about the horizon.
std::map<GroupStep, Worst> resolved_distances(const TensorScan& scan,
                                              const GradientSignal& signal) {
  std::map<GroupStep, Worst> worst;
  for (const auto& [group, tensors] : {std::pair{"grads", &scan.grads},
                                       std::pair{"params", &scan.params},
                                       std::pair{"batch_stats", &scan.batch_stats}}) {
    std::map<int64_t, double> largest;
    for (const TensorComparison& comparison : tensors->compared) {
      double& norm = largest[comparison.delta.step];
      norm = std::max(norm, comparison.norm_b);
    }
    for (const TensorComparison& comparison : tensors->compared) {
      Worst& entry = worst[{group, comparison.delta.step}];
      if (comparison.norm_b < std::ldexp(largest[comparison.delta.step], -24)) continue;
      if (left_out(group, comparison.delta.name, signal)) continue;
      note(entry, comparison);
    }
  }
  return worst;
}

}  // namespace

TensorOracleJudgement judge_tensors_against_oracle(const RunDir& a, const RunDir& b,
                                                   const RunDir& oracle,
                                                   const Tolerance& tolerance, double band,
                                                   const GradientSignal& signal) {
  TensorOracleJudgement judgement;
  const std::map<GroupStep, Worst> from_a = worst_distances(
      scan_tensors(a, oracle, tolerance.rtol, tolerance.atol), true, signal, &judgement);
  const TensorScan scan_b = scan_tensors(b, oracle, tolerance.rtol, tolerance.atol);
  const std::map<GroupStep, Worst> from_b = worst_distances(scan_b, false, signal, nullptr);
  const std::map<GroupStep, Worst> b_resolved = resolved_distances(scan_b, signal);
  for (const auto& [group_step, worst_a] : from_a) {
    const auto found = from_b.find(group_step);
    if (found == from_b.end()) continue;
    const Worst& horizon = b_resolved.at(group_step);
    if (horizon.rel_l2 >= kTensorOracleHorizon) {
      judgement.past_horizon.push_back(fmt::format(
          "step {} {}: past the predictability horizon, not judged: B's worst tensor, {}, is {} "
          "(relative L2) from the oracle's (A's worst, {}, {})",
          group_step.second, group_step.first, horizon.name, format_number(horizon.rel_l2),
          worst_a.name, format_number(worst_a.rel_l2)));
      continue;
    }
    ++judgement.groups;
    const Worst& worst_b = found->second;
    const double spread = sampling_spread(worst_a.elements, worst_b.elements);
    const double allowed = band * spread * worst_b.rel_l2;
    if (worst_a.rel_l2 <= allowed) continue;  // false for NaN
    judgement.beyond.push_back(fmt::format(
        "step {} {}: A's worst tensor {} ({} elements) is {} (relative L2) from the oracle's; "
        "B's worst, {} ({} elements), is {}; A may reach {} x {} (their sampling spread) x B's",
        group_step.second, group_step.first, worst_a.name, worst_a.elements,
        format_number(worst_a.rel_l2), worst_b.name, worst_b.elements,
        format_number(worst_b.rel_l2), format_number(band), format_number(spread)));
  }
  return judgement;
}

}  // namespace parity::compare
