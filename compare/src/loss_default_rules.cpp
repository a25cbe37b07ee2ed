// M11: label smoothing in two conventions (../shared/docs/migration-defaults.md item 25).
//
// Vocabulary (eps the smoothing, C the classes, p = softmax(logits), y a sample's label):
//   uniform targets   q_u = (1 - eps) onehot + eps/C: torch CrossEntropyLoss(label_smoothing),
//                     optax.smooth_labels; loss L_u = -sum q_u log p (H(q_u) included)
//   flax targets      q_f = onehot with on-value 1 - eps, off-value eps/(C - 1): flax
//                     examples/wmt/train.py compute_weighted_cross_entropy; loss
//                     L_f = -sum q_f log p - H(q_f) = KL(q_f || p)
//   offset            L_u - L_f = H(q_f) + (eps/C) (mean_{j != y} log p_j - log p_y): H(q_f) at
//                     near-uniform p, the first step, shrinking by (eps/C) x the logit margin as
//                     the model learns (a few percent of H over a short run)
//   logits layer      the dense layer whose outputs are the logits: its bias gradient is
//                     mean_batch(p - q), which sums to 0 over the classes whatever q is, so it
//                     is found from the recorded gradients alone
//   class shares      f_c, the share of the batch labelled c. The two runs' bias gradients at
//                     the first step (same parameters, same batch) differ by mean(q_f - q_u):
//                     d_c = g_u,c - g_f,c = -eps (C f_c - 1) / (C (C - 1)), so each f_c solved
//                     from d_c must lie in [0, 1]
//
// The rule: the losses part from the first step by an offset that stays about constant; the
// run with the lower loss reports KL; eps solved from H(q_f) = offset with C from the logits
// layer; the gradients apart by O(eps/C) and the logits layer's by exactly the targets'
// difference (valid class shares). It reads the runs only, never their cases.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "default_rules.h"
#include "figures.h"
#include "recorded_steps.h"

namespace parity::compare {
namespace {

// A 1-D gradient sums to zero over its classes, relative to the sum of its magnitudes, within
// float32 rounding (~1e-7 per element); a hidden layer's bias gradient sums to O(1) of it.
constexpr double kZeroSum = 1e-4;
// The offset over the steps stays within this fraction of the first step's: the cross term
// (eps/C) x the logit margin moves it a few percent (M11's 50 steps of Adam: 3.3%).
constexpr double kOffsetSpread = 0.15;
// The global gradient differs by the targets' difference through the backward pass: relative
// L2 of order eps/C (M11: 1.25% at eps/C = 1%). Generous: other causes of a step-0 loss gap
// (initialisation, a layer's form, smoothing on one side only) move the gradients by far more.
constexpr double kGradientFactor = 4;
// Class shares may miss [0, 1] by float rounding of the gradients over C(C-1)/eps.
constexpr double kShareMargin = 0.02;

// H(q_f) = -(1 - eps) log(1 - eps) - eps log(eps / (C - 1)): the constant the Flax examples
// subtract. Increasing in eps on [0, (C - 1)/C], where q_f is uniform and H(q_f) = log C.
double flax_target_entropy(double eps, double classes) {
  const double off_mass = eps > 0 ? eps * std::log(eps / (classes - 1)) : 0.0;
  return -(1 - eps) * std::log(1 - eps) - off_mass;
}

// The eps in (0, (C - 1)/C) whose H(q_f) is `offset`, by bisection; nullopt beyond log C.
std::optional<double> solve_epsilon(double offset, double classes) {
  double low = 0, high = (classes - 1) / classes;
  if (!(offset > 0) || offset >= flax_target_entropy(high, classes)) return std::nullopt;
  for (int i = 0; i < 100; ++i) {
    const double mid = (low + high) / 2;
    (flax_target_entropy(mid, classes) < offset ? low : high) = mid;
  }
  return (low + high) / 2;
}

// Which run reports KL (the lower loss) and the offset of the other's loss above it.
struct Offset {
  bool kl_is_a = false;
  double first = 0;   // at the first step
  double fitted = 0;  // mean over the steps
  double spread = 0;  // max |offset_t - fitted|
  size_t steps = 0;
};

Offset loss_offset(const RunPair& runs) {
  Offset offset;
  offset.kl_is_a = runs.common.front().a->loss < runs.common.front().b->loss;
  std::vector<double> values;
  for (const StepPair& pair : runs.common) {
    const double gap = pair.b->loss - pair.a->loss;
    if (std::isfinite(gap)) values.push_back(offset.kl_is_a ? gap : -gap);
  }
  offset.steps = values.size();
  offset.first = values.front();
  for (const double value : values) offset.fitted += value;
  offset.fitted /= static_cast<double>(values.size());
  for (const double value : values) {
    offset.spread = std::max(offset.spread, std::abs(value - offset.fitted));
  }
  return offset;
}

bool sums_to_zero(const std::vector<double>& values) {
  double sum = 0, magnitude = 0;
  for (const double value : values) {
    sum += value;
    magnitude += std::abs(value);
  }
  return magnitude > 0 && std::abs(sum) <= kZeroSum * magnitude;
}

// ||a - b|| / ||b|| over every gradient both runs recorded.
double gradients_rel_l2(const StepValues& a, const StepValues& b) {
  double difference = 0, norm = 0;
  for (const auto& [name, tensor_a] : a) {
    const auto tensor_b = b.find(name);
    if (name.rfind("grads/", 0) != 0 || tensor_b == b.end() ||
        tensor_b->second.values.size() != tensor_a.values.size()) {
      continue;
    }
    for (size_t i = 0; i < tensor_a.values.size(); ++i) {
      const double value_b = tensor_b->second.values[i];
      difference += (tensor_a.values[i] - value_b) * (tensor_a.values[i] - value_b);
      norm += value_b * value_b;
    }
  }
  return norm > 0 ? std::sqrt(difference / norm) : 0;
}

// A logits layer whose bias gradients fit the two targets at one eps.
struct LogitsFit {
  std::string name;     // the bias gradient's name
  double classes = 0;   // C
  double epsilon = 0;
  double min_share = 0, max_share = 0;
};

// Every 1-D gradient summing to zero in both runs is a candidate logits bias; the one whose
// width gives an eps at which the bias gradients' difference is a batch's class shares fits.
// nullopt unless exactly one fits.
std::optional<LogitsFit> fit_logits_layer(const StepValues& kl, const StepValues& uniform,
                                          double offset) {
  std::vector<LogitsFit> fits;
  for (const auto& [name, flax_bias] : kl) {
    const auto uniform_bias = uniform.find(name);
    const size_t width = flax_bias.values.size();
    if (name.rfind("grads/", 0) != 0 || flax_bias.shape.size() != 1 || width < 2 ||
        uniform_bias == uniform.end() || uniform_bias->second.values.size() != width ||
        !sums_to_zero(flax_bias.values) || !sums_to_zero(uniform_bias->second.values)) {
      continue;
    }
    const auto classes = static_cast<double>(width);
    const std::optional<double> epsilon = solve_epsilon(offset, classes);
    if (!epsilon) continue;
    LogitsFit fit{name, classes, *epsilon, 1, 0};
    for (size_t c = 0; c < width; ++c) {
      const double d = uniform_bias->second.values[c] - flax_bias.values[c];
      const double share = (1 - classes * (classes - 1) * d / *epsilon) / classes;
      fit.min_share = std::min(fit.min_share, share);
      fit.max_share = std::max(fit.max_share, share);
    }
    if (fit.min_share >= -kShareMargin && fit.max_share <= 1 + kShareMargin) fits.push_back(fit);
  }
  if (fits.size() != 1) return std::nullopt;
  return fits.front();
}

}  // namespace

// The loss gap at the first step with gradients that nearly agree: the initial-parameters rule
// would call it another model, so this runs before it (diagnosis.cpp).
std::optional<Diagnosis> label_smoothing_rule(const RunPair& runs, const Findings& findings) {
  const std::optional<int64_t> step = first_step_recorded(runs);
  if (!step || findings.first_loss_mismatch != step) return std::nullopt;
  const Offset offset = loss_offset(runs);
  if (!(offset.first > 0) || offset.spread > kOffsetSpread * offset.first) return std::nullopt;
  const StepValues a = read_values(runs.a, *step);
  const StepValues b = read_values(runs.b, *step);
  const StepValues& kl = offset.kl_is_a ? a : b;
  const StepValues& uniform = offset.kl_is_a ? b : a;
  const std::optional<LogitsFit> fit = fit_logits_layer(kl, uniform, offset.first);
  if (!fit) return std::nullopt;
  const double per_class = fit->epsilon / fit->classes;
  const double gradients = gradients_rel_l2(a, b);
  if (gradients > kGradientFactor * per_class) return std::nullopt;

  const char* kl_run = offset.kl_is_a ? "A" : "B";
  const char* uniform_run = offset.kl_is_a ? "B" : "A";
  return Diagnosis{
      "M11", "Label smoothing: torch's loss on one side, the Flax examples' KL on the other",
      fmt::format(
          "run {0}'s loss lies {1:.4f} above run {2}'s at step {3} and stays there (mean {4:.4f} "
          "over {5} steps, within {6:.4f}); {1:.4f} is H(q) of the Flax examples' targets "
          "(on-value 1 - eps, off-value eps/(C - 1)) for C = {7:.0f} classes and eps = {8:.4f}, "
          "the constant their loss subtracts; C from {9}, whose gradient sums to zero over the "
          "classes as a softmax cross-entropy's does. At step {3} the gradients differ by "
          "{10:.2f}% (relative L2; eps/C = {11:.2f}%), and {9} by exactly the two targets' "
          "difference averaged over the batch: class shares from {12:.3f} to {13:.3f}",
          uniform_run, offset.first, kl_run, *step, offset.fitted, offset.steps, offset.spread,
          fit->classes, fit->epsilon, fit->name, 100 * gradients, 100 * per_class, fit->min_share,
          fit->max_share),
      fmt::format(
          "Smooth the labels the same way and report the same loss. PyTorch's "
          "nn.CrossEntropyLoss(label_smoothing={0:.2g}) is, in JAX, "
          "optax.softmax_cross_entropy(logits, optax.smooth_labels(jax.nn.one_hot(y, C), "
          "{0:.2g})).mean(); the Flax examples' compute_weighted_cross_entropy (off-value "
          "eps/(C - 1), H(q) subtracted) has no PyTorch loss: to keep it, write it in PyTorch "
          "as -(q * log_softmax(logits)).sum(-1) - H(q) with those targets.",
          fit->epsilon)};
}

}  // namespace parity::compare
