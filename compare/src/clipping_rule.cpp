// M13: gradient clipping placed before the cross-device mean (../shared/docs/migration-defaults.md
// item 21). DDP averages the gradients during backward, so clip_grad_norm_ clips the mean; a
// pmap port that applies optax.clip_by_global_norm inside the mapped step before lax.pmean
// clips each device's gradient by its own norm, and averages after.
//
// What the runs record (docs/run-dir-format.md): grad_norm, the norm of the averaged gradient
// before clipping, and grads/, the gradient the optimizer applied. Clipping the mean scales it:
// the applied gradient keeps its direction. Clipping each device's own gradient does not: the
// mean of the clipped gradients points elsewhere, and is shorter, each device's gradient being
// longer than the mean (a mean of vectors each at most max_norm long is at most max_norm long,
// shorter unless they are parallel).
#include <fmt/format.h>

#include <cmath>

#include "default_rules.h"
#include "figures.h"
#include "recorded_steps.h"

namespace parity::compare {
namespace {

// The recorded gradients of a step, every tensor's values in name order.
std::vector<double> applied_gradients(const StepValues& values) {
  std::vector<double> out;
  for (const auto& [name, tensor] : values) {
    if (starts_with(name, "grads/")) out.insert(out.end(), tensor.values.begin(), tensor.values.end());
  }
  return out;
}

double dot(const std::vector<double>& x, const std::vector<double>& y) {
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += x[i] * y[i];
  return sum;
}

std::string applied_text(double norm, double before) {
  return fmt::format("{} ({:.3f} of the mean's)", format_number(norm), norm / before);
}

}  // namespace

std::optional<Diagnosis> clip_placement_rule(const RunPair& runs, const Findings& findings) {
  // The averaged gradients before clipping agree to float32 rounding; the applied ones turned
  // by far more than that (clipped per device, M13's turn by 1 - cosine = 8e-4: each device's
  // gradient is mostly scaled, by its own factor); a run clipped when what it applied is
  // shorter than the mean.
  constexpr double kSameNorm = 1e-4, kTurned = 1e-5, kShorter = 1e-4;
  const std::optional<int64_t> step = first_step_recorded(runs);
  if (!step || findings.first_loss_mismatch == step) return std::nullopt;
  const double before_a = runs.common.front().a->grad_norm;
  const double before_b = runs.common.front().b->grad_norm;
  if (!(before_a > 0 && before_b > 0) || std::abs(before_a / before_b - 1) > kSameNorm) {
    return std::nullopt;
  }
  const std::vector<double> a = applied_gradients(read_values(runs.a, *step));
  const std::vector<double> b = applied_gradients(read_values(runs.b, *step));
  if (a.empty() || a.size() != b.size()) return std::nullopt;
  const double norm_a = std::sqrt(dot(a, a)), norm_b = std::sqrt(dot(b, b));
  if (!(norm_a > 0 && norm_b > 0)) return std::nullopt;
  const double cosine = dot(a, b) / (norm_a * norm_b);
  const bool clipped_a = norm_a < before_a * (1 - kShorter);
  const bool clipped_b = norm_b < before_b * (1 - kShorter);
  if (!(clipped_a || clipped_b) || !(cosine < 1 - kTurned)) return std::nullopt;
  return Diagnosis{
      "M13", "Gradient clipping before the cross-device mean, not after it",
      fmt::format("at step {} the losses agree and so do the norms of the averaged gradients "
                  "before clipping (grad_norm: A {}, B {}), but the gradients the optimizers "
                  "applied point apart (cosine {:.4f}): A's has norm {}, B's {}. Clipping the "
                  "mean by its global norm scales it and keeps its direction; clipping each "
                  "device's gradient before the mean turns it and shortens it more, each "
                  "device's gradient being longer than the mean: {}'s, the shorter, is that one",
                  *step, format_number(before_a), format_number(before_b), cosine,
                  applied_text(norm_a, before_a), applied_text(norm_b, before_b),
                  norm_a < norm_b ? "A" : "B"),
      "Clip the averaged gradient, as DDP does (clip_grad_norm_ runs on .grad after the "
      "all-reduce in backward): in the port, apply optax.clip_by_global_norm to the gradients "
      "after lax.pmean (first in the optimizer's chain), not to each device's gradient inside "
      "the mapped step before it."};
}

}  // namespace parity::compare
