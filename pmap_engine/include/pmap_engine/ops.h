// The ops users write models with (jax.numpy / jax.nn / lax level). Binary ops broadcast as
// NumPy does; a Python-style scalar operand (a double) takes the other operand's dtype (JAX's
// weak typing). Shape and dtype errors name the op and both operands.
//
// Dimension legend used in comments: B batch, D features, K classes, ... Shapes in brackets.
#pragma once

#include <optional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine {

// --- element-wise arithmetic (broadcasting) ---
Array add(const Array& a, const Array& b);
Array sub(const Array& a, const Array& b);
Array mul(const Array& a, const Array& b);
Array div(const Array& a, const Array& b);
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array neg(const Array& x);
Array exp(const Array& x);
Array log(const Array& x);
Array tanh(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array abs(const Array& x);
Array sign(const Array& x);
Array square(const Array& x);

Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator-(const Array& x);
Array operator+(const Array& a, double b);
Array operator-(const Array& a, double b);
Array operator*(const Array& a, double b);
Array operator/(const Array& a, double b);
Array operator+(double a, const Array& b);
Array operator-(double a, const Array& b);
Array operator*(double a, const Array& b);
Array operator/(double a, const Array& b);

// --- comparisons (bool results) and selection ---
Array equal(const Array& a, const Array& b);
Array not_equal(const Array& a, const Array& b);
Array less(const Array& a, const Array& b);
Array less_equal(const Array& a, const Array& b);
Array greater(const Array& a, const Array& b);
Array greater_equal(const Array& a, const Array& b);
Array where(const Array& condition, const Array& if_true, const Array& if_false);

// --- constants and conversions ---
Array full(const Shape& shape, double value, DType dtype = DType::f32);
Array zeros(const Shape& shape, DType dtype = DType::f32);
Array ones(const Shape& shape, DType dtype = DType::f32);
Array zeros_like(const Array& x);
Array ones_like(const Array& x);
Array scalar_like(const Array& x, double value);  // a 0-d array of x's dtype
Array astype(const Array& x, DType dtype);
Array iota(DType dtype, const Shape& shape, int64_t dimension);
Array stop_gradient(const Array& x);

// --- reductions (negative axes count from the end; empty axes = all) ---
Array sum(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Array mean(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Array max(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);

// --- shape ops ---
Array reshape(const Array& x, const Shape& shape);  // one -1 allowed
Array transpose(const Array& x, std::vector<int64_t> permutation = {});  // default: reverse
Array broadcast_to(const Array& x, const Shape& shape);
Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions);
Array expand_dims(const Array& x, int64_t axis);
Array concatenate(const std::vector<Array>& arrays, int64_t axis);
Array slice(const Array& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit);
Array take_along_axis(const Array& x, const Array& indices, int64_t axis);
// lax.dynamic_slice(x, starts, slice_sizes): one i32 scalar start per dimension, clamped so the
// slice fits (XLA's DynamicSlice). Not differentiable in the engine (the SPMD partitioner's
// block cut, which runs after autodiff, is its user).
Array dynamic_slice(const Array& x, const std::vector<Array>& starts, const Shape& slice_sizes);

// --- linear algebra ---
// lax.dot_general: contract lhs_contracting with rhs_contracting, batch over lhs_batch/rhs_batch.
// Output: batch dims, then lhs free dims, then rhs free dims.
Array dot_general(const Array& lhs, const Array& rhs, const std::vector<int64_t>& lhs_contracting,
                  const std::vector<int64_t>& rhs_contracting,
                  const std::vector<int64_t>& lhs_batch = {},
                  const std::vector<int64_t>& rhs_batch = {});
// jnp.matmul for 1-D/2-D operands (and batched 3-D): x [B, D] @ w [D, H] -> [B, H].
Array matmul(const Array& a, const Array& b);

// --- convolution and pooling (jax.lax, flax.linen) ---
// Activations NHWC [B, H, W, C], kernels HWIO [KH, KW, C, O]: flax.linen.Conv's layout.
// Padding is lax's: per dimension a pair (lo, hi) of positions added before and after, or a
// name resolved by padtype_to_pads ("SAME", "SAME_LOWER", "VALID").
using PadPair = std::pair<int64_t, int64_t>;  // (lo, hi)
// Implicit on purpose: conv_general_dilated(x, w, {1, 1}, "SAME") or (..., {{1, 1}, {0, 1}}).
struct Padding {
  Padding(const char* name) : name(name) {}
  Padding(std::string name) : name(std::move(name)) {}
  Padding(std::vector<PadPair> pairs) : pairs(std::move(pairs)) {}
  Padding(std::initializer_list<PadPair> pairs) : pairs(pairs) {}
  std::string name;            // empty for explicit pairs
  std::vector<PadPair> pairs;  // used when `name` is empty
};
// lax.padtype_to_pads: "SAME" pads so that out = ceil(in / stride), the odd position of an
// odd total on the high side ("SAME_LOWER": on the low side); "VALID" pads nothing.
std::vector<PadPair> padtype_to_pads(const std::vector<int64_t>& in_shape,
                                     const std::vector<int64_t>& window_shape,
                                     const std::vector<int64_t>& window_strides,
                                     const std::string& padding);
// lax.conv_general_dilated with dimension_numbers ("NHWC", "HWIO", "NHWC"), 2-D spatial:
// lhs [B, H, W, C] * rhs [KH, KW, C, O] -> [B, H', W', O]. One stride, pair and dilation per
// spatial dimension; empty dilations mean 1. A padding name resolves against H, W and the
// rhs-dilated kernel, as lax does. feature_group_count must be 1 (no grouped convolutions).
Array conv_general_dilated(const Array& lhs, const Array& rhs,
                           const std::vector<int64_t>& window_strides, const Padding& padding,
                           const std::vector<int64_t>& lhs_dilation = {},
                           const std::vector<int64_t>& rhs_dilation = {},
                           int64_t feature_group_count = 1);
// lax.reduce_window with lax.add / lax.max: a window size, stride and padding per dimension of
// x (all of them, batch and features included). Padding adds 0 to a sum, -inf to a max.
Array reduce_window_sum(const Array& x, const std::vector<int64_t>& window_dimensions,
                        const std::vector<int64_t>& window_strides, const Padding& padding);
Array reduce_window_max(const Array& x, const std::vector<int64_t>& window_dimensions,
                        const std::vector<int64_t>& window_strides, const Padding& padding);
// flax.linen.max_pool / avg_pool: x [B..., H, W, C] (or unbatched [H, W, C]); window_shape and
// strides (default 1) over the spatial dimensions; explicit pairs pad the spatial dimensions.
// avg_pool divides by the window size when count_include_pad, else by the number of input
// elements in each window.
Array max_pool(const Array& x, const std::vector<int64_t>& window_shape,
               const std::vector<int64_t>& strides = {}, const Padding& padding = "VALID");
Array avg_pool(const Array& x, const std::vector<int64_t>& window_shape,
               const std::vector<int64_t>& strides = {}, const Padding& padding = "VALID",
               bool count_include_pad = true);

// --- neural-network functions (jax.nn / optax) ---
Array relu(const Array& x);
Array gelu(const Array& x, bool approximate = true);  // jax.nn.gelu's default is the tanh form
Array sigmoid(const Array& x);  // jax.nn.sigmoid = lax.logistic; floating-point x only
Array silu(const Array& x);     // jax.nn.silu (swish) = x * sigmoid(x)
Array logsumexp(const Array& x, int64_t axis, bool keepdims = false);
Array log_softmax(const Array& x, int64_t axis = -1);
Array softmax(const Array& x, int64_t axis = -1);
Array one_hot(const Array& labels, int64_t num_classes, DType dtype = DType::f32);
// optax.softmax_cross_entropy_with_integer_labels: logits [..., K], labels [...] int -> [...].
Array softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& labels);
// optax.softmax_cross_entropy: -sum(targets * log_softmax(logits)) over the class axis;
// logits, targets [..., K] (targets a distribution per row) -> [...].
Array softmax_cross_entropy(const Array& logits, const Array& targets);
// optax.smooth_labels: (1 - alpha) * labels + alpha / K for one-hot labels [..., K].
Array smooth_labels(const Array& labels, double alpha);
// mean((predictions - targets)^2) over every element (torch.nn.functional.mse_loss's mean).
Array mse(const Array& predictions, const Array& targets);

}  // namespace pmap_engine
