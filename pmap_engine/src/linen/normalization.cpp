// flax.linen.LayerNorm and BatchNorm (flax/linen/normalization.py, google/flax commit 18f8f31)
// as functions. Both are Flax's two helpers with different axes:
//
//   statistics  (_compute_stats) x is cast to at least f32 (force_float32_reductions=True:
//               bf16 and f16 become f32, f64 stays); mean = E[x], and
//               use_fast_variance=True (the default for both modules): var = E[x^2] - E[x]^2
//               clipped at 0, one pass (the clip keeps a round-off negative from giving NaN).
//               With an axis_name, E[x] and E[x^2] are stacked into one array and pmean'd
//               with one collective.
//               use_fast_variance=False: var = E[(x - mean)^2], a second pass over x. With an
//               axis_name the mean is pmean'd first and the squared deviations from that
//               global mean are pmean'd after, two collectives (maybe_distributed_mean called
//               once for mu, once for the deviations).
//   normalize   (_normalize) y = (x - mean) * (rsqrt(var + epsilon) * scale) + bias, in that
//               order, with x in its own dtype (so a bf16 x and f32 statistics give f32), then
//               cast to the result type of x, scale and bias.
//
// Reduction axes: the last one for LayerNorm (reduction_axes=-1), every axis but the last for
// BatchNorm (axis=-1 is the feature axis). Features are always the last axis here.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/broadcasting.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/linen.h"
#include "pmap_engine/ops.h"

namespace pmap_engine::linen {
namespace {

// x's shape with every reduction axis set to 1: where jnp.expand_dims(stat, axes) puts the
// reduced statistics back.
Shape kept_shape(const Shape& shape, const std::vector<int64_t>& reduction_axes) {
  Shape kept = shape;
  for (int64_t axis : reduction_axes) kept[static_cast<size_t>(axis)] = 1;
  return kept;
}

// Row `index` of a [2, ...] stack: [...].
Array unstack_row(const Array& stacked, int64_t index) {
  std::vector<int64_t> start(static_cast<size_t>(stacked.ndim()), 0);
  std::vector<int64_t> limit = stacked.shape();
  start[0] = index;
  limit[0] = index + 1;
  Shape row_shape(stacked.shape().begin() + 1, stacked.shape().end());
  return reshape(slice(stacked, start, limit), row_shape);
}

// _compute_stats(x, axes, axis_name, use_fast_variance) with use_mean true, no mask.
// x: [...] -> mean, var: x's shape without `axes` (per feature for BatchNorm, per example for
// LayerNorm)
BatchStats compute_stats(const Array& x_in, const std::vector<int64_t>& axes,
                         const std::optional<std::string>& axis_name, bool use_fast_variance) {
  const Array x = astype(x_in, promote_types("normalization", x_in.dtype(), DType::f32));
  if (!use_fast_variance) {
    Array mean_x = mean(x, axes);
    if (axis_name) mean_x = pmean(mean_x, *axis_name);
    Array var = mean(square(x - reshape(mean_x, kept_shape(x.shape(), axes))), axes);
    if (axis_name) var = pmean(var, *axis_name);
    return {mean_x, var};
  }
  Array mean_x = mean(x, axes);
  Array mean_x_squared = mean(square(x), axes);
  if (axis_name) {
    // jnp.stack((mu, mu2)) -> one pmean -> unstack: one collective for both statistics.
    const Array stacked = concatenate({expand_dims(mean_x, 0), expand_dims(mean_x_squared, 0)}, 0);
    const Array reduced = pmean(stacked, *axis_name);
    mean_x = unstack_row(reduced, 0);
    mean_x_squared = unstack_row(reduced, 1);
  }
  const Array var = maximum(scalar_like(mean_x, 0.0), mean_x_squared - square(mean_x));
  return {mean_x, var};
}

// _normalize with use_scale and use_bias true and the features on the last axis.
// x: [..., C], stats: x's shape without reduction_axes, scale, bias: [C] -> [..., C]
Array normalize(const Array& x, const BatchStats& stats, const std::vector<int64_t>& reduction_axes,
                const Array& scale, const Array& bias, double epsilon) {
  const Shape stats_shape = kept_shape(x.shape(), reduction_axes);
  Shape feature_shape(x.shape().size(), 1);
  feature_shape.back() = x.shape().back();
  const Array y = x - reshape(stats.mean, stats_shape);
  const Array multiplier =
      rsqrt(reshape(stats.var, stats_shape) + epsilon) * reshape(scale, feature_shape);
  const Array normalized = y * multiplier + reshape(bias, feature_shape);
  const DType result_dtype = promote_types(
      "normalization", promote_types("normalization", x.dtype(), scale.dtype()), bias.dtype());
  return astype(normalized, result_dtype);
}

// x has a feature axis, and every per-feature parameter is a vector [C] over it.
void check_features(const char* op, const Array& x,
                    const std::vector<std::pair<const char*, const Array*>>& per_feature) {
  check_valid_operand(op, x);
  const std::string x_type = type_to_string(x.dtype(), x.shape());
  if (x.ndim() < 1)
    throw EngineError(std::string(op) + ": x must have a feature axis, got " + x_type);
  for (const auto& [name, array] : per_feature) {
    check_valid_operand(op, *array);
    if (array->shape() != Shape{x.shape().back()}) {
      throw EngineError(std::string(op) + ": " + name + " must have shape [" +
                        std::to_string(x.shape().back()) + "] (the last axis of x " + x_type +
                        "), got " + type_to_string(array->dtype(), array->shape()));
    }
  }
}

void check_batch_norm_inputs(const char* op, const Array& x, const Array& scale, const Array& bias,
                             const BatchStats& running) {
  check_features(op, x,
                 {{"scale", &scale},
                  {"bias", &bias},
                  {"running mean", &running.mean},
                  {"running var", &running.var}});
}

// Every axis but the last: BatchNorm's reduction axes for feature axis -1.
std::vector<int64_t> all_but_last(const Array& x) {
  std::vector<int64_t> axes;
  for (int64_t axis = 0; axis + 1 < x.ndim(); ++axis) axes.push_back(axis);
  return axes;
}

}  // namespace

Array layer_norm(const Array& x, const Array& scale, const Array& bias, double epsilon,
                 bool use_fast_variance) {
  // x: [..., D], scale, bias: [D] -> [..., D]
  check_features("layer_norm", x, {{"scale", &scale}, {"bias", &bias}});
  const std::vector<int64_t> axes = {x.ndim() - 1};
  return normalize(x, compute_stats(x, axes, std::nullopt, use_fast_variance), axes, scale, bias,
                   epsilon);
}

BatchNormOutput batch_norm_train(const Array& x, const Array& scale, const Array& bias,
                                 const BatchStats& running, const BatchNormOptions& options) {
  // x: [..., C], scale, bias, running.mean, running.var: [C]
  check_batch_norm_inputs("batch_norm_train", x, scale, bias, running);
  const std::vector<int64_t> axes = all_but_last(x);
  const BatchStats batch = compute_stats(x, axes, options.axis_name, options.use_fast_variance);
  // ra = momentum * ra + (1 - momentum) * batch; both factors are Python floats in Flax, so
  // they take the statistics' dtype.
  const double momentum = options.momentum;
  const BatchStats updated{momentum * running.mean + (1.0 - momentum) * batch.mean,
                           momentum * running.var + (1.0 - momentum) * batch.var};
  return {normalize(x, batch, axes, scale, bias, options.epsilon), batch, updated};
}

Array batch_norm_eval(const Array& x, const Array& scale, const Array& bias,
                      const BatchStats& running, double epsilon) {
  // x: [..., C], scale, bias, running.mean, running.var: [C] -> [..., C]
  check_batch_norm_inputs("batch_norm_eval", x, scale, bias, running);
  return normalize(x, running, all_but_last(x), scale, bias, epsilon);
}

}  // namespace pmap_engine::linen
