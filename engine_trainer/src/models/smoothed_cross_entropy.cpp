#include "models/smoothed_cross_entropy.h"

#include <cmath>

#include "parity/common/error.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// flax examples/wmt/train.py compute_weighted_cross_entropy's normalizing_constant, with its
// 1e-20 inside the second log (which keeps eps = 0 finite: 0 log 1e-20 = 0).
double flax_examples_target_entropy(double epsilon, int64_t num_classes) {
  const double confidence = 1 - epsilon;
  const double low_confidence = epsilon / static_cast<double>(num_classes - 1);
  return -(confidence * std::log(confidence) +
           static_cast<double>(num_classes - 1) * low_confidence * std::log(low_confidence + 1e-20));
}

pe::Array smoothed_cross_entropy(const ModelSpec& model, const pe::Array& logits,
                                 const pe::Array& labels) {
  // logits: [B, C], labels: [B] int -> [B]
  const double epsilon = model.label_smoothing;
  if (epsilon == 0) return pe::softmax_cross_entropy_with_integer_labels(logits, labels);
  const int64_t num_classes = logits.shape().back();
  const pe::Array onehot = pe::one_hot(labels, num_classes, logits.dtype());
  if (model.label_smoothing_form == "uniform") {
    return pe::softmax_cross_entropy(logits, pe::smooth_labels(onehot, epsilon));
  }
  if (model.label_smoothing_form == "flax_examples") {
    // common_utils.onehot(targets, C, on_value=1-eps, off_value=eps/(C-1)).
    const double off_value = epsilon / static_cast<double>(num_classes - 1);
    const pe::Array targets = onehot * (1 - epsilon - off_value) + off_value;
    return pe::softmax_cross_entropy(logits, targets) -
           flax_examples_target_entropy(epsilon, num_classes);
  }
  throw InternalError("label_smoothing_form '" + model.label_smoothing_form +
                      "' passed case validation");
}

}  // namespace parity::engine_trainer
