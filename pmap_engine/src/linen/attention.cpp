// flax.linen's attention (flax/linen/attention.py, google/flax commit 18f8f31) as functions:
// dot_product_attention_weights, dot_product_attention and MultiHeadDotProductAttention for
// self-attention, with DenseGeneral (flax/linen/linear.py) for its projections.
//
// What Flax computes, step by step (dimension legend in linen.h):
//   1. promote_dtype: query, key (and value) are cast to their common dtype, `dtype`.
//   2. query / jnp.sqrt(D).astype(dtype): the query is scaled before the product, not the
//      logits after it.
//   3. einsum('...qhd,...khd->...hqk'): one dot_general with batch dimensions (..., H),
//      contracting D: logits [..., H, Lq, Lk].
//   4. jax.nn.softmax over Lk in `dtype` (bf16 logits give a bf16 softmax), unless
//      force_fp32_for_softmax and dtype is not f32: then in f32, and the weights stay f32.
//   5. Dropout (only when !deterministic and rate > 0): keep = bernoulli(rng, 1 - rate, shape),
//      shape [1, ..., 1, Lq, Lk] with broadcast_dropout (one mask for every batch element and
//      head) or the weights' shape; weights * (keep.astype(dtype) / asarray(1 - rate, dtype)).
//      This multiplies by a rounded 1 / keep_prob, where flax.linen.Dropout divides by
//      keep_prob: the two can differ in the last bit. (rate 1 gives 0 / 0 = NaN multipliers,
//      as in Flax.)
//   6. einsum('...hqk,...khd->...qhd', weights, value): dot_general with batch (..., H),
//      contracting Lk, giving [..., H, Lq, Dv], transposed to [..., Lq, H, Dv].
// Masks and attention biases (mask=, bias=) are not modelled.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/broadcasting.h"
#include "pmap_engine/linen.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random_ops.h"

namespace pmap_engine::linen {
namespace {

std::string type_of(const Array& x) { return type_to_string(x.dtype(), x.shape()); }

// flax.linen.dtypes.promote_dtype(*arrays, dtype=None): every array cast to their result type.
std::vector<Array> promote_all(const char* op, const std::vector<Array>& arrays) {
  DType dtype = arrays.front().dtype();
  for (const Array& array : arrays) dtype = promote_types(op, dtype, array.dtype());
  std::vector<Array> promoted;
  for (const Array& array : arrays) promoted.push_back(astype(array, dtype));
  return promoted;
}

// 0, 1, ..., count - 1 followed by `extra`.
std::vector<int64_t> leading_axes(int64_t count, std::vector<int64_t> extra = {}) {
  std::vector<int64_t> axes;
  for (int64_t axis = 0; axis < count; ++axis) axes.push_back(axis);
  axes.insert(axes.end(), extra.begin(), extra.end());
  return axes;
}

// Flax's asserts, as errors naming both operands. Operands are [..., L, H, depth]; `what`
// names the one compared with the query.
void check_against_query(const char* op, const Array& query, const Array& other, const char* what,
                         bool same_depth) {
  check_valid_operand(op, query);
  check_valid_operand(op, other);
  const auto fail = [&](const std::string& rule) {
    throw EngineError(std::string(op) + ": " + rule + "; query " + type_of(query) + ", " + what +
                      " " + type_of(other) + " (layout [..., length, heads, depth])");
  };
  if (query.ndim() < 3) fail("query must have at least 3 dimensions");
  if (other.ndim() != query.ndim())
    fail(std::string("query and ") + what + " must have the same rank");
  const size_t n = query.shape().size();
  const Shape& q = query.shape();
  const Shape& o = other.shape();
  if (!std::equal(q.begin(), q.end() - 3, o.begin())) fail("batch dimensions must match");
  if (q[n - 2] != o[n - 2]) fail("the number of heads must match");
  if (same_depth && q[n - 1] != o[n - 1]) fail("query and key depths must match");
}

// jnp.sqrt(D).astype(dtype): D is a Python int, whose square root JAX takes in f32 (x64 off,
// the default) or, for an f64 computation (which needs x64 on), in f64; then cast to dtype.
Array depth_scale(int64_t depth, const Array& like) {
  const double root = std::sqrt(static_cast<double>(depth));
  return scalar_like(like, like.dtype() == DType::f64 ? root : static_cast<float>(root));
}

// Step 5 above. weights: [..., H, Lq, Lk] -> the same shape
Array attention_dropout(const Array& weights, DType dtype, const AttentionOptions& options) {
  if (!options.dropout_key) {
    throw EngineError(
        "dot_product_attention: dropout_rate " + std::to_string(options.dropout_rate) +
        " with deterministic=false needs a dropout_key (Flax: dropout_rng, or the module's "
        "'dropout' rng); pass one, or set deterministic");
  }
  const double keep_prob = 1.0 - options.dropout_rate;
  Shape mask_shape = weights.shape();
  if (options.broadcast_dropout) std::fill(mask_shape.begin(), mask_shape.end() - 2, 1);
  const Array keep = random::bernoulli(*options.dropout_key, keep_prob, mask_shape);
  const Array multiplier = astype(keep, dtype) / Array::scalar(keep_prob, dtype);
  return weights * multiplier;
}

// DenseGeneral(features, axis=the last `num_contracting` axes) with a bias:
// dot_general(x, kernel) contracting those axes with the kernel's leading ones, plus the bias
// reshaped to [1, ..., 1, features...].
// x: [..., In...], layer.kernel: [In..., Out...], layer.bias: [Out...] -> [..., Out...]
Array dense_general(const Array& x_in, const Tree& layer, int64_t num_contracting) {
  const std::vector<Array> promoted =
      promote_all("DenseGeneral", {x_in, layer["kernel"].leaf(), layer["bias"].leaf()});
  const Array& x = promoted[0];
  const Array& kernel = promoted[1];
  const Array& bias = promoted[2];
  const int64_t num_kept = x.ndim() - num_contracting;
  std::vector<int64_t> x_axes;
  for (int64_t axis = num_kept; axis < x.ndim(); ++axis) x_axes.push_back(axis);
  const Array out = dot_general(x, kernel, x_axes, leading_axes(num_contracting));
  Shape bias_shape(static_cast<size_t>(num_kept), 1);
  bias_shape.insert(bias_shape.end(), bias.shape().begin(), bias.shape().end());
  return out + reshape(bias, bias_shape);
}

// params[layer][name] must have shape `expected`.
void check_param(const Tree& params, const std::string& layer, const std::string& name,
                 const Shape& expected) {
  const Array& param = params[layer][name].leaf();
  if (param.shape() != expected) {
    throw EngineError("multi_head_self_attention: params " + layer + "." + name +
                      " must have shape " + shape_to_string(expected) + ", got " + type_of(param) +
                      " (Flax's MultiHeadDotProductAttention layout, linen.h)");
  }
}

}  // namespace

Array dot_product_attention_weights(const Array& query_in, const Array& key_in,
                                    const AttentionOptions& options) {
  // query: [..., Lq, H, D], key: [..., Lk, H, D] -> [..., H, Lq, Lk]
  const char* op = "dot_product_attention_weights";
  check_against_query(op, query_in, key_in, "key", /*same_depth=*/true);
  const std::vector<Array> promoted = promote_all(op, {query_in, key_in});
  const Array& query = promoted[0];
  const Array& key = promoted[1];
  const DType dtype = query.dtype();
  const int64_t n = query.ndim();
  const Array scaled_query = query / depth_scale(query.shape().back(), query);
  const std::vector<int64_t> batch_and_heads = leading_axes(n - 3, {n - 2});
  Array weights =
      dot_general(scaled_query, key, {n - 1}, {n - 1}, batch_and_heads, batch_and_heads);
  if (options.force_fp32_for_softmax && dtype != DType::f32) {
    weights = softmax(astype(weights, DType::f32));
  } else {
    weights = astype(softmax(weights), dtype);
  }
  if (!options.deterministic && options.dropout_rate > 0.0) {
    weights = attention_dropout(weights, dtype, options);
  }
  return weights;
}

Array dot_product_attention(const Array& query_in, const Array& key_in, const Array& value_in,
                            const AttentionOptions& options) {
  // query: [..., Lq, H, D], key: [..., Lk, H, D], value: [..., Lk, H, Dv] -> [..., Lq, H, Dv]
  const char* op = "dot_product_attention";
  check_against_query(op, query_in, key_in, "key", /*same_depth=*/true);
  check_against_query(op, query_in, value_in, "value", /*same_depth=*/false);
  const int64_t n = query_in.ndim();
  if (key_in.shape()[n - 3] != value_in.shape()[n - 3]) {
    throw EngineError(std::string(op) + ": key and value lengths must match; key " +
                      type_of(key_in) + ", value " + type_of(value_in));
  }
  const std::vector<Array> promoted = promote_all(op, {query_in, key_in, value_in});
  const Array weights = dot_product_attention_weights(promoted[0], promoted[1], options);
  // With force_fp32_for_softmax the weights may be f32 and the value not: einsum promotes.
  const std::vector<Array> operands = promote_all(op, {weights, promoted[2]});
  // weights: [..., H, Lq, Lk] . value: [..., Lk, H, Dv] -> [..., H, Lq, Dv]
  const Array heads_first = dot_general(operands[0], operands[1], {n - 1}, {n - 3},
                                        leading_axes(n - 2), leading_axes(n - 3, {n - 2}));
  return transpose(heads_first, leading_axes(n - 3, {n - 2, n - 3, n - 1}));
}

Array multi_head_self_attention(const Array& x, const Tree& params, int64_t num_heads,
                                const AttentionOptions& options) {
  // x: [..., L, E] -> [..., L, F] (F = E unless the out kernel says otherwise)
  if (x.ndim() < 2) {
    throw EngineError("multi_head_self_attention: x must be [..., length, features], got " +
                      type_of(x));
  }
  const Shape& query_kernel = params["query"]["kernel"].leaf().shape();
  if (query_kernel.size() != 3 || query_kernel[1] != num_heads) {
    throw EngineError("multi_head_self_attention: params query.kernel must be [features, " +
                      std::to_string(num_heads) + " heads, head_dim], got " +
                      shape_to_string(query_kernel));
  }
  const int64_t features = x.shape().back();
  const int64_t head_dim = query_kernel[2];
  const Shape& out_kernel = params["out"]["kernel"].leaf().shape();
  const int64_t out_features = out_kernel.empty() ? 0 : out_kernel.back();
  for (const char* layer : {"query", "key", "value"}) {
    check_param(params, layer, "kernel", {features, num_heads, head_dim});
    check_param(params, layer, "bias", {num_heads, head_dim});
  }
  check_param(params, "out", "kernel", {num_heads, head_dim, out_features});
  check_param(params, "out", "bias", {out_features});
  // [..., L, E] -> [..., L, H, Dh] each
  const Array query = dense_general(x, params["query"], 1);
  const Array key = dense_general(x, params["key"], 1);
  const Array value = dense_general(x, params["value"], 1);
  // [..., L, H, Dh] -> [..., L, F]
  return dense_general(dot_product_attention(query, key, value, options), params["out"], 2);
}

}  // namespace pmap_engine::linen
