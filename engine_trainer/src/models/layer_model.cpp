// Each layer kind as the Flax module or function docs/model-layers.md names (flax 0.12.8,
// google/flax commit 18f8f31; jax-ml/jax commit cec06d1):
//   dense            flax/linen/linear.py      Dense.__call__: dot_general(x, kernel) + bias
//   conv             flax/linen/linear.py      _Conv.__call__: lax.conv_general_dilated (NHWC,
//                                              HWIO; a padding name goes to lax as is) + bias
//   max/avg_pool     flax/linen/pooling.py     max_pool, avg_pool
//   global_avg_pool  jnp.mean(x, axis=(1, 2))
//   flatten          x.reshape((x.shape[0], -1))
//   activations      jax/_src/nn/functions.py  relu, silu, gelu; jnp.tanh
//   dropout          flax/linen/stochastic.py  Dropout: the identity when deterministic or at
//                                              rate 0; else keep = bernoulli(make_rng("dropout"),
//                                              1 - rate, x.shape), select(keep, x / (1 - rate), 0)
//   batch_norm       flax/linen/normalization.py BatchNorm (pmap_engine::linen)
//   layer_norm       flax/linen/normalization.py LayerNorm (pmap_engine::linen)
//   residual         a submodule returning shortcut(x) + branch(x)
//   patch_embed      nn.Conv(kernel_size=strides=patch, padding="VALID"), then
//                    x.reshape((n, h * w, c)) (vit_jax/models_vit.py VisionTransformer)
//   class_token      VisionTransformer: jnp.concatenate([jnp.tile(cls, [n, 1, 1]), x], axis=1)
//   pos_embed        vit_jax/models_vit.py AddPositionEmbs: inputs + pos_embedding
//   attention        flax/linen/attention.py   MultiHeadDotProductAttention (pmap_engine::linen)
//   mlp_block        Dense -> gelu -> Dense (vit_jax/models_vit.py MlpBlock, without dropout), a
//                    submodule holding Dense_0 and Dense_1
//   mean_tokens, take_class_token   x.mean(axis=1), x[:, 0]
#include "models/layer_model.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "models/model.h"
#include "parity/common/dropout_streams.h"
#include "parity/common/error.h"
#include "parity/common/flax_rng.h"
#include "parity/common/layer_intermediates.h"
#include "parity/common/model_layers.h"
#include "pmap_engine/linen.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random_ops.h"

namespace parity::engine_trainer {
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

// One module's variables: its "params" and "batch_stats" entries, the updated statistics it
// returns (the mutable collection), and its path from the top module (the make_rng suffix).
struct Scope {
  const pe::Tree& params;
  const pe::Tree& batch_stats;
  std::map<std::string, pe::Tree> new_batch_stats;
  std::vector<std::string> path;
};

// The collection entry of a submodule that may have none: a residual without BatchNorm has no
// "batch_stats", one whose layers hold no parameters (x + relu(x)) no "params". Flax creates a
// submodule's entry in a collection only when it writes a variable there
// (flax/core/scope.py, Scope._mutable_collection), and reads an absent one as empty
// (Scope._collection), so model.init leaves such a residual out of the tree.
const pe::Tree& entry_or_empty(const pe::Tree& collection, const std::string& name) {
  static const pe::Tree empty = pe::Tree::dict({});
  const auto& entries = collection.entries();
  const auto found = entries.find(name);
  return found == entries.end() ? empty : found->second;
}

class LayerApplier {
 public:
  // `dropout_key`: the "dropout" rng (training only); `draws` collects each site's key and mask.
  LayerApplier(bool train, const std::optional<pe::Array>& dropout_key,
               std::map<std::string, pe::Tree>& draws)
      : train_(train), dropout_key_(dropout_key), draws_(draws) {}

  // Training with dropout off, every layer's output kept in `outputs` by its intermediate path
  // (layer_intermediates.h): what model.apply(..., capture_intermediates=True) collects
  // (flax/linen/module.py, Module._call_wrapped_method sows each module's output into the
  // "intermediates" collection), for every layer of the list rather than only the modules.
  void capture(std::map<std::string, pe::Array>& outputs) {
    deterministic_ = true;
    captured_ = &outputs;
  }

  // `prefix`: the intermediate paths' prefix of the list ("" for the model's own).
  pe::Array apply_all(const std::vector<LayerSpec>& layers, pe::Array x, Scope& scope,
                      ModuleNamer& namer, const std::string& prefix) const {
    for (size_t i = 0; i < layers.size(); ++i) {
      const LayerSpec& layer = layers[i];
      const std::string path = intermediate_path(prefix, i, layers.size(), layer.kind);
      x = apply(layer, x, scope, namer.next(layer.kind), path);
      const std::optional<std::string> output = intermediate_output_path(path, layer.kind);
      if (captured_ != nullptr && output) captured_->insert_or_assign(*output, x);
    }
    return x;
  }

 private:
  // `name`: the layer's submodule name in `scope` (empty for functions); `path`: its
  // intermediate path.
  pe::Array apply(const LayerSpec& layer, const pe::Array& x, Scope& scope, const std::string& name,
                  const std::string& path) const {
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
    if (kind == "dropout") return dropout(layer, x, scope, name);
    if (kind == "batch_norm") return batch_norm(layer, x, scope, name);
    if (kind == "layer_norm") {
      const pe::Tree& p = scope.params[name];
      return pe::linen::layer_norm(x, p["scale"], p["bias"], layer.epsilon,
                                   layer.use_fast_variance);
    }
    if (kind == "residual") return residual(layer, x, scope, name, path);
    if (kind == "mlp_block") return mlp_block(layer, x, scope, name, path);
    return transformer_layer(layer, x, scope, name);
  }

  pe::Array transformer_layer(const LayerSpec& layer, const pe::Array& x, const Scope& scope,
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
      options.deterministic = true;  // rate 0 (the case checker refuses others), or evaluation
      return pe::linen::multi_head_self_attention(x, scope.params[name], layer.heads, options);
    }
    if (kind == "mean_tokens") return pe::mean(x, {1});
    if (kind == "take_class_token") {
      const pe::Array first = pe::slice(x, {0, 0, 0}, {batch, 1, x.shape()[2]});
      return pe::reshape(first, {batch, x.shape()[2]});
    }
    throw InternalError("layer kind '" + kind + "' passed case validation");
  }

  // flax/linen/stochastic.py Dropout.__call__: the identity when deterministic or at rate 0;
  // otherwise rng = self.make_rng("dropout") (the module's first call: count 1), mask =
  // random.bernoulli(rng, p=keep_prob, shape=inputs.shape), lax.select(mask, inputs /
  // keep_prob, zeros_like(inputs)).
  pe::Array dropout(const LayerSpec& layer, const pe::Array& x, const Scope& scope,
                    const std::string& name) const {
    if (!train_ || deterministic_ || layer.rate == 0) return x;
    if (!dropout_key_) {
      throw InternalError("dropout at " + layer.origin + " trains without a dropout key");
    }
    std::vector<std::string> path = scope.path;
    path.push_back(name);
    // DropoutKeys::site_key on the host computes the same key.
    const pe::Array key = pe::random::fold_in(*dropout_key_, flax_make_rng_data(path, 1));
    const double keep_prob = 1.0 - layer.rate;
    const pe::Array keep = pe::random::bernoulli(key, keep_prob, x.shape());
    draws_.emplace(join_module_path(path), pe::Tree::tuple({key, keep}));
    return pe::where(keep, x / keep_prob, pe::zeros_like(x));
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
    options.use_fast_variance = layer.use_fast_variance;
    const pe::linen::BatchNormOutput out =
        pe::linen::batch_norm_train(x, p["scale"], p["bias"], running, options);
    scope.new_batch_stats.emplace(
        name, pe::Tree::dict({{"mean", out.running.mean}, {"var", out.running.var}}));
    return out.y;
  }

  // The branch and the projection are one submodule: the projection's layers continue the
  // branch's names (Residual_1/Conv_2), as infer_model_shapes names them.
  pe::Array residual(const LayerSpec& layer, const pe::Array& x, Scope& scope,
                     const std::string& name, const std::string& path) const {
    std::vector<std::string> module_path = scope.path;
    module_path.push_back(name);
    Scope inner{entry_or_empty(scope.params, name),
                entry_or_empty(scope.batch_stats, name),
                {},
                module_path};
    ModuleNamer namer;
    const pe::Array branch =
        apply_all(layer.layers, x, inner, namer, intermediate_branch_prefix(path));
    const pe::Array shortcut =
        layer.projection.empty()
            ? x
            : apply_all(layer.projection, x, inner, namer, intermediate_projection_prefix(path));
    if (!inner.new_batch_stats.empty()) {
      scope.new_batch_stats.emplace(name, pe::Tree::dict(std::move(inner.new_batch_stats)));
    }
    return shortcut + branch;
  }

  // vit_jax's MlpBlock as a compact submodule: its two Dense modules are Dense_0 and Dense_1
  // within it, the gelu between them a function.
  pe::Array mlp_block(const LayerSpec& layer, const pe::Array& x, const Scope& scope,
                      const std::string& name, const std::string& path) const {
    std::vector<std::string> module_path = scope.path;
    module_path.push_back(name);
    Scope inner{scope.params[name], entry_or_empty(scope.batch_stats, name), {}, module_path};
    ModuleNamer namer;
    return apply_all(mlp_block_layers(layer, x.shape().back()), x, inner, namer,
                     intermediate_branch_prefix(path));
  }

  bool train_;
  bool deterministic_ = false;
  std::map<std::string, pe::Array>* captured_ = nullptr;
  const std::optional<pe::Array>& dropout_key_;
  std::map<std::string, pe::Tree>& draws_;
};

}  // namespace

LayerModelOutput layer_model_apply(const ModelSpec& model, const pe::Tree& params,
                                   const pe::Tree& batch_stats, const pe::Array& x, bool train,
                                   const std::optional<pe::Array>& dropout_key) {
  pe::Shape image = {x.shape()[0]};
  image.insert(image.end(), model.input.begin(), model.input.end());
  Scope scope{params, batch_stats, {}, {}};
  ModuleNamer namer;
  std::map<std::string, pe::Tree> draws;
  const pe::Array outputs = LayerApplier(train, dropout_key, draws)
                                .apply_all(model.layers, pe::reshape(x, image), scope, namer, "");
  return {outputs, pe::Tree::dict(std::move(scope.new_batch_stats)),
          pe::Tree::dict(std::move(draws))};
}

LayerIntermediates layer_model_intermediates(const ModelSpec& model, const pe::Tree& params,
                                             const pe::Tree& batch_stats, const pe::Array& x) {
  pe::Shape image = {x.shape()[0]};
  image.insert(image.end(), model.input.begin(), model.input.end());
  Scope scope{params, batch_stats, {}, {}};
  ModuleNamer namer;
  std::map<std::string, pe::Tree> draws;
  LayerIntermediates out{pe::reshape(x, image), {}};
  LayerApplier applier(/*train=*/true, std::nullopt, draws);
  applier.capture(out.outputs);
  applier.apply_all(model.layers, out.input, scope, namer, "");
  return out;
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
    std::optional<pe::Array> dropout_key;
    if (args.size() > 4) dropout_key = args[4].leaf();
    const LayerModelOutput out =
        layer_model_apply(model, args[0], args[3], args[1].leaf(), /*train=*/true, dropout_key);
    return pe::Tree::tuple({outputs_loss(model, out.outputs, args[2].leaf()),
                            pe::Tree::tuple({out.batch_stats, out.dropout_draws})});
  };
}

bool has_dropout(const ModelSpec& model) { return !dropout_sites(model).empty(); }

}  // namespace parity::engine_trainer
