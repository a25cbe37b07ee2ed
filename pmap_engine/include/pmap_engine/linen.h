// flax.linen's layers as pure functions of their inputs and parameters: what a Flax module
// computes in __call__, with the parameters (and BatchNorm's batch_stats) passed in and the
// updated state returned, and no module system. A later layer graph builds models from these.
//
// Sources modelled (google/flax commit 18f8f31, version 0.12.8; jax-ml/jax commit cec06d1):
//   flax/linen/normalization.py  _compute_stats, _normalize, LayerNorm, BatchNorm
//   flax/linen/stochastic.py     Dropout
//   flax/linen/attention.py      dot_product_attention_weights, dot_product_attention,
//                                MultiHeadDotProductAttention
//   flax/linen/linear.py         DenseGeneral (the attention projections)
//
// Each function follows the module with its default attributes except where a parameter below
// names one. Every function is composed from the public ops, so gradients come from the
// primitives' VJPs and a traced program reads like the jaxpr Flax gives.
//
// Dimension legend: B batch, L sequence, Lq / Lk query / key length, H heads, D or Dh features
// per head, Dv value features per head, E or C features (embedding, channels); "..." any
// leading dimensions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pmap_engine/array.h"
#include "pmap_engine/tree.h"

namespace pmap_engine::linen {

// ---- normalization.cpp --------------------------------------------------------------------

// flax.linen.LayerNorm(epsilon, use_fast_variance): statistics over the last axis, computed in
// at least f32, variance E[x^2] - E[x]^2 clipped at 0 (use_fast_variance=True, Flax's
// default: one pass, which loses digits where |mean| is large against the spread) or
// E[(x - mean)^2] (False: two passes, torch's form); then
// (x - mean) * (rsqrt(var + epsilon) * scale) + bias. Flax's default epsilon is 1e-6 (torch's
// LayerNorm uses 1e-5).
// x: [..., D], scale: [D], bias: [D] -> [..., D]
Array layer_norm(const Array& x, const Array& scale, const Array& bias, double epsilon = 1e-6,
                 bool use_fast_variance = true);

// One BatchNorm's 'batch_stats' collection: per-feature mean and (biased) variance.
struct BatchStats {
  Array mean;  // [C]
  Array var;   // [C]
};

struct BatchNormOptions {
  // Flax's convention: running = momentum * running + (1 - momentum) * batch. (torch's
  // momentum 0.1 weights the batch value: torch 0.1 is Flax 0.9.)
  double momentum = 0.99;
  double epsilon = 1e-5;
  // BatchNorm(axis_name=...): inside pmap, the statistics are pmean'd over this axis, so every
  // device normalizes with the statistics of the whole global batch.
  std::optional<std::string> axis_name;
  // The batch variance as layer_norm computes it: E[x^2] - E[x]^2 (Flax's default) or
  // E[(x - mean)^2], whose axis_name form pmeans the mean, then the squared deviations.
  bool use_fast_variance = true;
};

struct BatchNormOutput {
  Array y;             // [..., C]
  BatchStats batch;    // the batch's statistics (after the pmean, when axis_name is set)
  BatchStats running;  // the updated running statistics
};

// flax.linen.BatchNorm(use_running_average=False), feature axis -1: statistics over every
// axis but the last (biased variance, computed as in layer_norm), the running statistics
// updated with them.
// x: [..., C], scale, bias: [C], running: [C] each
BatchNormOutput batch_norm_train(const Array& x, const Array& scale, const Array& bias,
                                 const BatchStats& running, const BatchNormOptions& options = {});

// flax.linen.BatchNorm(use_running_average=True): normalizes with the running statistics.
// x: [..., C], scale, bias: [C], running: [C] each -> [..., C]
Array batch_norm_eval(const Array& x, const Array& scale, const Array& bias,
                      const BatchStats& running, double epsilon = 1e-5);

// ---- stochastic.cpp -----------------------------------------------------------------------

// flax.linen.Dropout(rate)(x, deterministic, rng=key): x itself when deterministic or rate is
// 0; otherwise keep = random.bernoulli(key, 1 - rate, x.shape) and where(keep, x / (1 - rate),
// 0) (zeros for rate 1). `key` is a u32[2] key (random_ops.h); unused when deterministic.
// x: [...] -> [...]
Array dropout(const Array& x, double rate, const Array& key, bool deterministic = false);

// ---- attention.cpp ------------------------------------------------------------------------

struct AttentionOptions {
  // Dropout on the attention weights, applied when !deterministic and dropout_rate > 0; it
  // then needs dropout_key. broadcast_dropout draws one [Lq, Lk] mask for every batch element
  // and head (Flax's default).
  double dropout_rate = 0.0;
  bool deterministic = false;
  bool broadcast_dropout = true;
  std::optional<Array> dropout_key;
  // Flax's default (false) computes the softmax in the inputs' dtype (bf16 stays bf16).
  bool force_fp32_for_softmax = false;
};

// flax.linen.dot_product_attention_weights: softmax over keys of
// einsum('...qhd,...khd->...hqk', query / sqrt(D), key), then the optional dropout.
// query: [..., Lq, H, D], key: [..., Lk, H, D] -> [..., H, Lq, Lk]
Array dot_product_attention_weights(const Array& query, const Array& key,
                                    const AttentionOptions& options = {});

// flax.linen.dot_product_attention: einsum('...hqk,...khd->...qhd', weights, value).
// query: [..., Lq, H, D], key: [..., Lk, H, D], value: [..., Lk, H, Dv] -> [..., Lq, H, Dv]
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const AttentionOptions& options = {});

// flax.linen.MultiHeadDotProductAttention(num_heads)(x): self-attention (inputs_k = inputs_v =
// inputs_q). `params` is the module's parameter dict, in Flax's layout:
//   query, key, value: {kernel: [E, H, Dh], bias: [H, Dh]}   (DenseGeneral, features=(H, Dh))
//   out:               {kernel: [H, Dh, F], bias: [F]}       (DenseGeneral, axis=(-2, -1))
// with H = num_heads; qkv_features H * Dh and out_features F are read from the kernels (Flax's
// defaults make both E). As in Flax, attention dropout applies only when
// options.dropout_rate > 0 and !options.deterministic.
// x: [..., L, E] -> [..., L, F]
Array multi_head_self_attention(const Array& x, const Tree& params, int64_t num_heads,
                                const AttentionOptions& options = {});

}  // namespace pmap_engine::linen
