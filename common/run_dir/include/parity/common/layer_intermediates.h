// The layer outputs ("intermediates") both producers record for a layers model at the case's
// first record step (docs/run-dir-format.md: tensors/intermediates_NNNNNN.safetensors), and the
// paths that name them. A Flax user gets them from model.apply(..., capture_intermediates=True)
// (flax/linen/module.py, Module._call_wrapped_method: self.sow('intermediates', '__call__', y)
// after each module's call), a PyTorch user from forward hooks
// (torch/nn/modules/module.py, Module.register_forward_hook: hook(module, input, output) after
// forward()). Neither names a layer the other way, and Flax captures modules only (not nn.gelu,
// a function), so both producers name every layer of the case's list by its place in it:
//
//   03_gelu                          layer 3 of the top list, a gelu
//   05_residual/02_conv              layer 2 of residual 5's branch
//   05_residual/projection/00_conv   layer 0 of its projection (the shortcut)
//   05_residual/sum                  its output: shortcut + branch
//   07_residual/01_mlp_block/01_gelu an mlp_block's three layers (Dense, gelu, Dense); the block's
//                                    output is its last dense's, so it has no entry of its own
//
// The index is zero-padded to the width of its list's last index (at least two digits), so the
// names sorted as strings are the forward order: digits sort before "projection", which sorts
// before "sum".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/model_layers.h"

namespace parity {

// The file's names: "intermediates/" + path for each layer output, and the batch as "input".
inline constexpr const char* kIntermediatesGroup = "intermediates/";
// The batch as the model reads it (the dataset's rows reshaped to [model] input, NHWC), the
// first layer's input.
inline constexpr const char* kIntermediatesInput = "input";

// Layer `index` of a list of `count` layers whose paths start with `prefix` ("" for the model's
// own list): prefix + "03_gelu".
std::string intermediate_path(const std::string& prefix, size_t index, size_t count,
                              const std::string& kind);
// Where the layer at `path` records its output: `path`; a residual's sum at path + "/sum";
// nothing for an mlp_block (its last layer's output is the block's).
std::optional<std::string> intermediate_output_path(const std::string& path,
                                                    const std::string& kind);
// The prefix of the layers inside a residual or an mlp_block at `path` (path + "/"), and of a
// residual's projection (path + "/projection/").
std::string intermediate_branch_prefix(const std::string& path);
std::string intermediate_projection_prefix(const std::string& path);

// What an mlp_block on tokens of `width` features applies, in order: Dense(hidden) -> gelu ->
// Dense(width) (vit_jax/models_vit.py MlpBlock, without its dropout; torchvision's MLPBlock:
// Linear -> GELU -> Linear). The gelu takes the block's `approximate`.
std::vector<LayerSpec> mlp_block_layers(const LayerSpec& block, int64_t width);

struct LayerIntermediate {
  std::string path;
  std::string kind;            // the layer's; "residual" for a residual's sum
  std::vector<int64_t> shape;  // one sample's, in Flax's layout (NHWC images, tokens x features)
  // The intermediates it reads: kIntermediatesInput for the first layer; a residual's sum reads
  // its branch's output and its shortcut's (the projection's, or the residual's input).
  std::vector<std::string> inputs;
  // A window's step (conv, pools): input pixels per output pixel along height and width.
  std::array<int64_t, 2> strides = {1, 1};
  // The Flax module whose parameters the layer applies ("Conv_0", "Residual_1/Dense_0",
  // model_layers.h ModuleNamer); empty for a function (relu, pools) and a residual's sum.
  std::string module;
  // A batch_norm or layer_norm whose case asks for Flax's one-pass variance (use_fast_variance,
  // the default; the engine computes it, ddp_ref always computes two passes).
  bool one_pass_variance = false;
};

// Whether the producers record intermediates for `model`: a layers model (not the widths
// shorthand) without a BatchNorm that syncs over replicas (one device's forward alone does not
// have the global batch's statistics; ddp_ref refuses such a BatchNorm anyway).
bool records_intermediates(const ModelSpec& model);

// Every intermediate of a layers model in forward order, which is also the order of their paths
// as strings; a residual's layers come before its sum, its branch before its projection.
std::vector<LayerIntermediate> layer_intermediates(const ModelSpec& model);

}  // namespace parity
