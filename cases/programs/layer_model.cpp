// Each layer kind as the Flax module or function docs/model-layers.md names (flax 0.12.8,
// google/flax commit 18f8f31; jax-ml/jax commit cec06d1):
//   dense            flax/linen/linear.py      Dense.__call__: dot_general(x, kernel) + bias
//   conv             flax/linen/linear.py      _Conv.__call__: lax.conv_general_dilated (NHWC,
//                                              HWIO; a padding name goes to lax as is) + bias
//   max/avg_pool     flax/linen/pooling.py     max_pool, avg_pool
//   global_avg_pool  jnp.mean(x, axis=(1, 2))
//   flatten          x.reshape((x.shape[0], -1))
//   activations      jax/_src/nn/functions.py  relu, silu, gelu; jnp.tanh
//   dropout          flax/linen/stochastic.py  Dropout: the identity when deterministic
//   batch_norm       flax/linen/normalization.py BatchNorm (pmap_engine::linen)
//   layer_norm       flax/linen/normalization.py LayerNorm (pmap_engine::linen)
//   residual         a submodule returning shortcut(x) + branch(x)
//   patch_embed      nn.Conv(kernel_size=strides=patch, padding="VALID"), then
//                    x.reshape((n, h * w, c)) (vit_jax/models_vit.py VisionTransformer)
//   class_token      VisionTransformer: jnp.concatenate([jnp.tile(cls, [n, 1, 1]), x], axis=1)
//   pos_embed        vit_jax/models_vit.py AddPositionEmbs: inputs + pos_embedding
//   attention        flax/linen/attention.py   MultiHeadDotProductAttention (pmap_engine::linen)
//   mlp_block        Dense -> gelu -> Dense (vit_jax/models_vit.py MlpBlock, without dropout)
//   mean_tokens, take_class_token   x.mean(axis=1), x[:, 0]
#include "layer_model.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "mlp_program.h"
#include "parity/common/error.h"
#include "parity/common/layer_search.h"
#include "parity/common/model_layers.h"
#include "pmap_engine/linen.h"
#include "pmap_engine/ops.h"

namespace parity::cases {
namespace {

constexpr const char* kSyncAxis = "data";

pe::Padding engine_padding(const LayerPadding& padding) {
  if (padding.mode != "explicit") return padding.mode;
  std::vector<pe::PadPair> pairs;
  for (const auto& [low, high] : padding.pairs) pairs.emplace_back(low, high);
  return pairs;
}

// flax/linen/linear.py Dense.__call__: lax.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((),
// ()))), then + bias: the last axis of a batch of vectors or of tokens.
pe::Array dense(const pe::Array& x, const pe::Tree& p, bool use_bias) {
  const pe::Array y = pe::dot_general(x, p["kernel"].leaf(), {x.ndim() - 1}, {0});
  return use_bias ? y + p["bias"].leaf() : y;
}

// One module's variables: its "params" and "batch_stats" entries, and the updated statistics
// it returns (the mutable collection).
struct Scope {
  const pe::Tree& params;
  const pe::Tree& batch_stats;
  std::map<std::string, pe::Tree> new_batch_stats;
};

// The collection entry of a submodule that may have none (a residual without BatchNorm has no
// "batch_stats").
const pe::Tree& entry_or_empty(const pe::Tree& collection, const std::string& name) {
  static const pe::Tree empty = pe::Tree::dict({});
  const auto& entries = collection.entries();
  const auto found = entries.find(name);
  return found == entries.end() ? empty : found->second;
}

class LayerApplier {
 public:
  explicit LayerApplier(bool train) : train_(train) {}

  pe::Array apply_all(const std::vector<LayerSpec>& layers, pe::Array x, Scope& scope,
                      ModuleNamer& namer) const {
    for (const LayerSpec& layer : layers) x = apply(layer, x, scope, namer.next(layer.kind));
    return x;
  }

 private:
  // `name`: the layer's submodule name in `scope` (empty for functions).
  pe::Array apply(const LayerSpec& layer, const pe::Array& x, Scope& scope,
                  const std::string& name) const {
    const std::string& kind = layer.kind;
    if (kind == "dense") return dense(x, scope.params[name], layer.use_bias);
    if (kind == "conv") {
      const pe::Tree& p = scope.params[name];
      const std::vector<int64_t> strides = layer.strides.empty() ? std::vector<int64_t>{1, 1}
                                                                 : layer.strides;
      const pe::Array y =
          pe::conv_general_dilated(x, p["kernel"], strides, engine_padding(layer.padding));
      return layer.use_bias ? y + p["bias"].leaf() : y;
    }
    if (kind == "max_pool") {
      return pe::max_pool(x, layer.kernel, layer.strides, engine_padding(layer.padding));
    }
    if (kind == "avg_pool") {
      return pe::avg_pool(x, layer.kernel, layer.strides, engine_padding(layer.padding),
                          layer.count_include_pad);
    }
    if (kind == "global_avg_pool") return pe::mean(x, {1, 2});
    if (kind == "flatten") return pe::reshape(x, {x.shape()[0], -1});
    if (kind == "relu") return pe::relu(x);
    if (kind == "tanh") return pe::tanh(x);
    if (kind == "silu") return pe::silu(x);
    if (kind == "gelu") return pe::gelu(x, layer.approximate);
    if (kind == "dropout") {
      if (train_ && layer.rate > 0) {
        throw InternalError("dropout at " + layer.origin +
                            " passed require_trainable_layers with a rate above 0");
      }
      return x;
    }
    if (kind == "batch_norm") return batch_norm(layer, x, scope, name);
    if (kind == "layer_norm") {
      const pe::Tree& p = scope.params[name];
      return pe::linen::layer_norm(x, p["scale"], p["bias"], layer.epsilon);
    }
    if (kind == "residual") return residual(layer, x, scope, name);
    return transformer_layer(layer, x, scope, name);
  }

  pe::Array transformer_layer(const LayerSpec& layer, const pe::Array& x, Scope& scope,
                              const std::string& name) const {
    const std::string& kind = layer.kind;
    const int64_t batch = x.shape()[0];
    if (kind == "patch_embed") {
      const pe::Tree& p = scope.params[name];
      pe::Array y = pe::conv_general_dilated(x, p["kernel"], layer.kernel, "VALID");
      if (layer.use_bias) y = y + p["bias"].leaf();
      return pe::reshape(y, {batch, y.shape()[1] * y.shape()[2], y.shape()[3]});
    }
    if (kind == "class_token") {
      const pe::Array& cls = scope.params["cls"].leaf();
      return pe::concatenate({pe::broadcast_to(cls, {batch, 1, x.shape()[2]}), x}, 1);
    }
    if (kind == "pos_embed") return x + scope.params[name]["pos_embedding"].leaf();
    if (kind == "attention") {
      pe::linen::AttentionOptions options;
      options.deterministic = true;  // rate 0 (require_trainable_layers), or evaluation
      return pe::linen::multi_head_self_attention(x, scope.params[name], layer.heads, options);
    }
    if (kind == "mlp_block") {
      const pe::Tree& p = scope.params[name];
      return dense(pe::gelu(dense(x, p["Dense_0"], true), layer.approximate), p["Dense_1"], true);
    }
    if (kind == "mean_tokens") return pe::mean(x, {1});
    if (kind == "take_class_token") {
      const pe::Array first = pe::slice(x, {0, 0, 0}, {batch, 1, x.shape()[2]});
      return pe::reshape(first, {batch, x.shape()[2]});
    }
    throw InternalError("layer kind '" + kind + "' passed case validation");
  }

  pe::Array batch_norm(const LayerSpec& layer, const pe::Array& x, Scope& scope,
                       const std::string& name) const {
    const pe::Tree& p = scope.params[name];
    const pe::Tree& stats = scope.batch_stats[name];
    const pe::linen::BatchStats running{stats["mean"], stats["var"]};
    if (!train_) {
      scope.new_batch_stats.emplace(name, stats);
      return pe::linen::batch_norm_eval(x, p["scale"], p["bias"], running, layer.epsilon);
    }
    pe::linen::BatchNormOptions options;
    options.momentum = layer.momentum;
    options.epsilon = layer.epsilon;
    if (layer.sync) options.axis_name = kSyncAxis;
    const pe::linen::BatchNormOutput out =
        pe::linen::batch_norm_train(x, p["scale"], p["bias"], running, options);
    scope.new_batch_stats.emplace(
        name, pe::Tree::dict({{"mean", out.running.mean}, {"var", out.running.var}}));
    return out.y;
  }

  // The branch and the projection are one submodule: the projection's layers continue the
  // branch's names (Residual_1/Conv_2), as infer_model_shapes names them.
  pe::Array residual(const LayerSpec& layer, const pe::Array& x, Scope& scope,
                     const std::string& name) const {
    Scope inner{scope.params[name], entry_or_empty(scope.batch_stats, name), {}};
    ModuleNamer namer;
    const pe::Array branch = apply_all(layer.layers, x, inner, namer);
    const pe::Array shortcut =
        layer.projection.empty() ? x : apply_all(layer.projection, x, inner, namer);
    if (!inner.new_batch_stats.empty()) {
      scope.new_batch_stats.emplace(name, pe::Tree::dict(std::move(inner.new_batch_stats)));
    }
    return shortcut + branch;
  }

  bool train_;
};

void require_no_dropout(const CaseSpec& spec) {
  const LayerSpec* layer = find_layer(spec.model.layers, [](const LayerSpec& candidate) {
    return (candidate.kind == "dropout" || candidate.kind == "attention") && candidate.rate > 0;
  });
  if (layer == nullptr) return;
  throw InputError(fmt::format(
      "case {}: model.layers: {} at {} has rate {}; the engine's layer model does not thread a "
      "dropout key through the train step yet (nn.Dropout draws bernoulli(key, 1 - rate)), so "
      "it trains rate = 0 only: set rate = 0",
      spec.name, layer->kind, layer->origin, layer->rate));
}

}  // namespace

LayerModelOutput layer_model_apply(const ModelSpec& model, const pe::Tree& params,
                                   const pe::Tree& batch_stats, const pe::Array& x, bool train) {
  pe::Shape image = {x.shape()[0]};
  image.insert(image.end(), model.input.begin(), model.input.end());
  Scope scope{params, batch_stats, {}};
  ModuleNamer namer;
  const pe::Array outputs =
      LayerApplier(train).apply_all(model.layers, pe::reshape(x, image), scope, namer);
  return {outputs, pe::Tree::dict(std::move(scope.new_batch_stats))};
}

pe::Tree initial_batch_stats(const ModelSpec& model, pe::DType dtype) {
  NamedTensors stats;
  for (const ModelTensor& tensor : infer_model_shapes(model.layers, model.input).batch_stats) {
    const std::string statistic = tensor.name.substr(tensor.name.rfind('/') + 1);
    const float initial = statistic == "var" ? 1.0f : 0.0f;  // "mean": 0
    stats.emplace(tensor.name, HostTensor::from_f32(tensor.shape,
                                                    std::vector<float>(static_cast<size_t>(tensor.shape.front()), initial)));
  }
  if (stats.empty()) return pe::Tree::dict({});
  return cast_tree(params_from_tensors(stats, name_separator(model)), dtype);
}

pe::TreeFunction layer_model_loss(const ModelSpec& model) {
  return [model](const std::vector<pe::Tree>& args) {
    const LayerModelOutput out =
        layer_model_apply(model, args[0], args[3], args[1].leaf(), /*train=*/true);
    return pe::Tree::tuple({outputs_loss(model, out.outputs, args[2].leaf()), out.batch_stats});
  };
}

void require_trainable_layers(const CaseSpec& spec) {
  require_no_dropout(spec);
  if (spec.train.dtype != "f32") {
    throw InputError(fmt::format(
        "case {}: train.dtype = \"{}\": the engine's layer model trains in f32 only (mixed "
        "precision is implemented for widths models); set train.dtype = \"f32\"",
        spec.name, spec.train.dtype));
  }
}

}  // namespace parity::cases
