// Diagnosis rules for the framework defaults that differ between PyTorch and Flax/Optax
// (../shared/docs/migration-defaults.md; the catalogue's M cases, cases/m*.toml). Each reads its
// fingerprint from the recorded tensors alone, never from the case files, so it judges imported
// real runs as it judges the producers' runs, and stays silent where its fingerprint is absent.
//
//   M1  initialisers            kernels' std x sqrt(fan_in) at the first step: 1 (Flax's
//                               lecun_normal) vs 1/sqrt(3) (PyTorch's kaiming_uniform(a=sqrt 5)),
//                               biases zero vs uniform
//   M3  conv padding            ... is a conv, each run's output reproduced from the input and
//                               its kernel by a different padding before the image
//   M4  GELU                    the first layer output that parts (its inputs agreeing) is a
//                               gelu, one run's the tanh form, the other's the erf form
//   M5  LayerNorm epsilon       ... is a layer_norm, each row of one a multiple of the other's,
//                               eps_B - eps_A solved from the rows' variances
//   M2  BatchNorm momentum      running means at step 0 in a constant ratio in every channel, the
//                               EMA weights solved from steps 0 and 1
//   M12 BatchNorm under DP      the first BatchNorm's running mean at the first step: one run's
//                               a multiple of replica 0's batch mean at its input in every
//                               channel (its own batch), the other's not (the global batch)
//   M6  Adam L2 vs AdamW        equal gradients; the first updates differ by lr x lambda x theta
//                               and point opposite ways exactly where |g| < lambda |theta|
//   M7  decoupled decay lambda  equal gradients; the first updates differ by exactly
//                               -lr (lambda_A - lambda_B) theta
//   M9  RMSprop defaults        equal gradients; each run's second update is g1 over its own
//                               RMSprop denominator, decay or eps placement solved apart
//   M10 Adagrad defaults        ... over sqrt(g0^2 + g1^2 + c), the floors c (start + eps
//                               inside the root) apart
//   M11 label smoothing form    the losses apart from the first step by a nearly constant
//                               offset (within 15% of it), H(q) of the Flax examples' targets
//                               at an eps solved from it; the logits layer's bias gradients
//                               apart by the targets' difference
//   M13 clipping placement      the averaged gradients' norms before clipping agree, the applied
//                               gradients point apart and one is shorter than the mean
//   M14 normalisation variance  the first layer output that parts is a batch_norm or
//                               layer_norm whose input agrees and whose |mean| is large against
//                               its std, the one-pass variance's float32 error,
//                               2^-24 (mean/std)^2, explaining how far the outputs part
#pragma once

#include <optional>
#include <vector>

#include "checks.h"

namespace parity::compare {

// default_rules.cpp: M1, M6 and M7.
std::optional<Diagnosis> initialiser_rule(const RunPair& runs, const Findings& findings);
std::optional<Diagnosis> weight_decay_rule(const RunPair& runs, const Findings& findings);
// layer_output_rules.cpp: M3, M4, M5 and M14, by the first diverging layer's kind.
std::optional<Diagnosis> diverging_layer_rule(const RunPair& runs, const Findings& findings);
// batch_norm_rules.cpp: M2 and M12.
std::optional<Diagnosis> batch_norm_momentum_rule(const RunPair& runs, const Findings& findings);
std::optional<Diagnosis> batch_norm_sync_rule(const RunPair& runs, const Findings& findings);
// optimizer_default_rules.cpp: M9 and M10.
std::optional<Diagnosis> rmsprop_defaults_rule(const RunPair& runs, const Findings& findings);
std::optional<Diagnosis> adagrad_defaults_rule(const RunPair& runs, const Findings& findings);
// loss_default_rules.cpp: M11.
std::optional<Diagnosis> label_smoothing_rule(const RunPair& runs, const Findings& findings);
// clipping_rule.cpp: M13.
std::optional<Diagnosis> clip_placement_rule(const RunPair& runs, const Findings& findings);

// Every rule above, each on its own (diagnose() orders them among the other rules and stops at
// the first that matches): matching_default_rules (compare.h) runs them all.
using DefaultRule = std::optional<Diagnosis> (*)(const RunPair&, const Findings&);
const std::vector<DefaultRule>& default_rules();

}  // namespace parity::compare
