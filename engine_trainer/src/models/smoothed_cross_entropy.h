// The case's softmax cross-entropy with label smoothing (model.label_smoothing), in the two
// conventions a port meets (../shared/docs/migration-defaults.md item 25). With eps the smoothing
// and C the classes, each sample's target q and loss are:
//
//   uniform        q = (1 - eps) onehot + eps/C          loss = -sum q log p
//                  torch CrossEntropyLoss(label_smoothing=eps); optax.smooth_labels followed by
//                  optax.softmax_cross_entropy. The loss includes H(q): it never reaches 0.
//   flax_examples  q = onehot(on 1 - eps, off eps/(C-1))  loss = -sum q log p - H(q) = KL(q || p)
//                  flax examples/wmt/train.py (and lm1b) compute_weighted_cross_entropy: it
//                  subtracts the normalizing constant H(q), so the reported loss can reach 0.
//
// The gradients differ only through q: p - q, the targets apart by eps/C - eps/(C-1) = O(eps/C^2)
// off and eps/C on the true class; the losses by H(q) plus that small cross term.
#pragma once

#include "parity/common/case_spec.h"
#include "pmap_engine/ops.h"

namespace parity::engine_trainer {

// H(q) of the flax_examples targets for C classes: -(1-eps) log(1-eps) - eps log(eps/(C-1)),
// the constant compute_weighted_cross_entropy subtracts.
double flax_examples_target_entropy(double epsilon, int64_t num_classes);

// Per-sample loss [B] of logits [B, C] against integer labels [B] with the case's smoothing;
// eps = 0 is optax.softmax_cross_entropy_with_integer_labels itself.
pmap_engine::Array smoothed_cross_entropy(const ModelSpec& model, const pmap_engine::Array& logits,
                                          const pmap_engine::Array& labels);

}  // namespace parity::engine_trainer
