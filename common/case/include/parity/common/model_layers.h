// A model as an ordered list of layers ([model] layers in a case file; docs/model-layers.md):
// what each layer is, and what the list computes from the case's input shape: each layer's
// output shape and the model's parameters with their canonical (Flax) names and shapes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parity {

// A window's padding: "SAME" or "VALID" as lax.padtype_to_pads reads them, or explicit
// (low, high) pairs, one per spatial axis.
struct LayerPadding {
  std::string mode = "VALID";  // SAME | VALID | explicit
  std::vector<std::array<int64_t, 2>> pairs;

  bool operator==(const LayerPadding& other) const {
    return mode == other.mode && pairs == other.pairs;
  }
};

// One layer. Which fields a kind reads is layer_kinds() below; the others keep their defaults.
struct LayerSpec {
  std::string kind;
  int64_t features = 0;               // dense, conv, patch_embed: output features; mlp_block: hidden
  int64_t heads = 0;                  // attention
  std::vector<int64_t> kernel;        // conv: [kh, kw]; pools: the window; patch_embed: the patch
  std::vector<int64_t> strides;       // conv, pools; empty: 1 (conv) or the window (pools)
  LayerPadding padding;               // conv, pools
  bool use_bias = true;               // dense, conv
  bool count_include_pad = true;      // avg_pool
  bool approximate = false;           // gelu, mlp_block: the tanh form (jax.nn.gelu's default) or erf
  double rate = 0;                    // dropout; attention: dropout on the attention weights
  double momentum = 0;                // batch_norm, Flax's convention (weighs the old average)
  double epsilon = 0;                 // batch_norm, layer_norm
  bool sync = false;                  // batch_norm: statistics over every replica's batch
  // batch_norm, layer_norm: the engine's variance E[x^2] - E[x]^2 (Flax's default) or
  // E[(x - E[x])^2]; ddp_ref computes torch's two-pass form whatever it says.
  bool use_fast_variance = true;
  std::vector<LayerSpec> layers;      // residual: the branch
  std::vector<LayerSpec> projection;  // residual: the shortcut (empty: identity)
  // Where the layer was written ("f.toml:14:5" or "--set model.layers=...") and its place in
  // the list ("model.layers[4].layers[1]"), for errors; not part of the case.
  std::string origin;
  std::string place;

  bool operator==(const LayerSpec& other) const;
};

// A layer kind and the keys it takes, in canonical order (the order the case writer prints).
struct LayerKind {
  std::string name;
  std::vector<std::string> required;
  std::vector<std::string> optional;
};
const std::vector<LayerKind>& layer_kinds();
const LayerKind* find_layer_kind(const std::string& name);

// flax.linen's auto-names of the submodules of one parent module (flax/linen/module.py,
// Module.__post_init__: autoname_cursor): Class_i, with one counter per class.
class ModuleNamer {
 public:
  // The name the next layer of `kind` gets in this parent ("Conv_0", "Residual_1"); empty for
  // the kinds that are functions rather than modules (relu, pools, flatten, ...).
  std::string next(const std::string& kind);

 private:
  std::map<std::string, int> counters_;
};

// "Residual_1/Dropout_0" -> {"Residual_1", "Dropout_0"}: a module path as case files and run
// directories write it, as the list of scope names.
std::vector<std::string> split_module_path(const std::string& path);
// The inverse: {"Residual_1", "Dropout_0"} -> "Residual_1/Dropout_0".
std::string join_module_path(const std::vector<std::string>& path);

// A parameter (or a BatchNorm statistic) of the model: "Conv_0/kernel" and its shape, in
// Flax's layout (dense kernels (in, out), conv kernels HWIO).
struct ModelTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// One layer as shape inference met it, for the limits on what a case may ask (case_limits.h).
struct LayerShape {
  const LayerSpec* layer = nullptr;  // into the list given to infer_model_shapes
  std::vector<int64_t> input;        // one sample's
  std::vector<int64_t> output;
  double parameters = 0;  // elements of its own parameters (a residual's are its layers')
};

struct ModelShapes {
  std::vector<int64_t> output;           // one sample's output shape
  std::vector<ModelTensor> params;       // the "params" collection
  std::vector<ModelTensor> batch_stats;  // BatchNorm running mean and var
  // Every layer, nested ones included, each after the layers it holds (a residual after its
  // branch and projection).
  std::vector<LayerShape> layers;
};

// Shape inference refuses a layer whose output holds more values per sample than this: past it
// the products of sizes would leave int64 (and no machine holds 2^48 floats per sample). What a
// case may really ask is the memory estimate's business (case_limits.h).
inline constexpr double kMaxSampleElements = 281474976710656.0;  // 2^48

// Layer keys that are sizes (features, hidden, heads, kernel, strides, padding) are at most
// this, so that shape inference's sums of them cannot overflow.
inline constexpr int64_t kMaxLayerSize = 2147483647;  // 2^31 - 1

// The shapes `layers` compute from one sample of shape `input`, and the model's tensors named
// as flax.linen auto-names submodules: Class_i with one counter per class within each parent
// (flax/linen/module.py, Module.__post_init__); a residual is a submodule Residual_i whose
// projection continues its counters. Throws InputError naming the layer's origin and what would
// fit when a layer cannot take its input. Linear in the number of layers.
ModelShapes infer_model_shapes(const std::vector<LayerSpec>& layers,
                               const std::vector<int64_t>& input);

// Throws InputError "model.layers[3]: dense at f.toml:12:3: PROBLEM; FIX".
[[noreturn]] void refuse_layer(const LayerSpec& layer, const std::string& problem,
                               const std::string& fix);

}  // namespace parity
