// PyTorch and Flax parameter names and layouts mapped onto parity's canonical ones, so that a
// weight file written by either framework can be compared with a run directory or with the
// other framework's file.
//
// Canonical names are "<kind><i>.<leaf>", with Flax's layouts (parity's run directories use
// them: ddp_ref exports its torch parameters this way, ddp_ref/src/model.cpp):
//   dense<i>.kernel (in, out)           torch Linear.weight (out, in), transposed
//   dense<i>.bias                       torch Linear.bias
//   conv<i>.kernel (k..., in, out)      torch ConvNd.weight (out, in, k...), axes moved
//   layernorm<i>.scale / .bias          torch LayerNorm.weight / .bias
//   batchnorm<i>.scale / .bias / .mean / .var
//                                       torch BatchNorm.weight / .bias / .running_mean /
//                                       .running_var (num_batches_tracked has no Flax twin:
//                                       listed as ignored)
//   embed<i>.embedding                  Flax Embed.embedding (from Flax names only: a torch
//                                       Embedding.weight is indistinguishable from a Linear
//                                       weight without a bias)
//   attention<i>.query.kernel / .key.kernel / .value.kernel (in, E), .query.bias ... (E),
//   .out.kernel (E, E), .out.bias       torch MultiheadAttention: in_proj_weight (3E, E)'s row
//                                       blocks q, k, v, transposed (or q/k/v_proj_weight when
//                                       kdim/vdim differ), in_proj_bias's blocks, out_proj.weight
//                                       transposed, out_proj.bias; Flax
//                                       MultiHeadDotProductAttention's query/key/value/out
//                                       DenseGeneral kernels with the heads axes (H, E/H) merged
//                                       (E = H * E/H): no case, no head count
//   classtoken<i>.cls                   torchvision's class_token, timm's cls_token, Flax's cls
//                                       (1, 1, E)
//   posembed<i>.pos_embedding           pos_embedding (torchvision's Encoder, Flax's
//                                       AddPositionEmbs), timm's pos_embed (1, T, E)
// Layouts from torch/nn/modules/{linear,conv,normalization,batchnorm,activation}.py and
// flax/linen/{linear,normalization,attention}.py. torch splits attention heads as
// view(..., H, E/H) of the projected features (torch/nn/functional.py,
// multi_head_attention_forward) and Flax's DenseGeneral features are (H, E/H): feature
// h * E/H + d is head h, element d in both.
//
// A module's kind comes from its leaves and their ranks, never from its name, so user-named
// modules ("fc1", nn.Dense(name="head")) map too; the exceptions are the leaves that are
// parameters of their own (class token, position embeddings: told by their names) and Flax's
// attention, a module whose submodules are named query, key, value and out. A torch attention
// module takes its out_proj Linear with it. Modules of one kind are numbered in the natural
// order of their paths ("layers.2" before "layers.10", "Dense_2" before "Dense_10"), which is
// registration order for nn.Sequential and numbered names, and Flax's creation order for its
// auto-named modules. Flax collection prefixes ("params/", "batch_stats/") are dropped.
//
// For a case whose model is a list of layers (docs/model-layers.md) the canonical names are
// instead the Flax paths infer_model_shapes gives ("Conv_0/kernel", "Residual_2/Conv_2/kernel",
// "BatchNorm_0/mean", "Residual_0/MultiHeadDotProductAttention_0/query/kernel", "cls"), same
// layouts and leaves, attention's with the case's heads split out: query/key/value kernels
// (E, H, E/H), biases (H, E/H), out kernel (H, E/H, E). A Flax file whose module paths are all
// the case's maps by identity; any other file (torch names, user-named Flax modules) maps by
// kind: its k-th module of a kind, numbered as above, onto the case's k-th module of that kind
// in creation order. A case's MLP block (MlpBlock_i: Dense_0, Dense_1) is a kind of its own
// there: a module's two dense children that map E -> hidden -> E (torchvision's mlp.0 and mlp.3,
// or mlp.linear_1 and linear_2; nn.TransformerEncoderLayer's linear1 and linear2) are one, so
// an MLP's layers land in MLP blocks whatever the head's name sorts after. For torchvision's
// ResNet names natural path order is creation order: per block conv1 < conv2 < downsample.0
// and bn1 < bn2 < downsample.1 (the shortcut is created after the branch, as the case's
// projection), the stem's conv1/bn1 sort before layer1 < layer2, and block indices sort as
// numbers. For its VisionTransformer too: conv_proj is the patch embedding; per encoder layer
// ln_1 < ln_2, and encoder.layers sorts before encoder.ln, the final norm, as the case creates
// Residual_2i/LayerNorm_0, Residual_2i+1/LayerNorm_0, then LayerNorm_0.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "parity/common/host_tensor.h"
#include "parity/common/model_layers.h"

namespace parity::interop {

enum class ParamNaming { kAuto, kTorch, kFlax };

// "auto", "torch", "flax"; and back (an unknown name throws InputError listing the choices).
std::string param_naming_name(ParamNaming naming);
ParamNaming param_naming_from_name(const std::string& name);

struct NameMapping {
  std::string source;     // the name in the file: "0.weight", "params/Dense_0/kernel"
  std::string canonical;  // "dense0.kernel"
  // What was done to the values ("" when taken as they are); for unmapped and ignored names,
  // why.
  std::string note;
};

// "dense0.kernel <- 0.weight (transposed: torch (out, in) -> (in, out))": one mapping, as the
// commands print it.
std::string describe_mapping(const NameMapping& mapping);

struct CanonicalParams {
  ParamNaming naming = ParamNaming::kAuto;  // what the source was read as
  NamedTensors tensors;  // canonical name -> tensor in canonical layout, plus unmapped ones
  std::vector<NameMapping> mappings;
  // Source names no rule covers, kept under their own names so that they show up as
  // unmatched, with why.
  std::vector<NameMapping> unmapped;
  std::vector<NameMapping> ignored;  // bookkeeping with no counterpart (num_batches_tracked)
  // The canonical names of model state rather than parameters: BatchNorm's running mean and
  // variance, which a saved model (a state_dict, Flax's variables) holds with its parameters
  // and a run directory records as its batch_stats group.
  std::set<std::string> statistics;
};

// Maps `source` (one framework's names, without any "params/", "grads/" or "batch_stats/"
// group prefix of the run directory). kAuto reads names with a "weight" or "running_mean" leaf
// as torch, names with a "kernel", "scale", "embedding", "mean" or "var" leaf as Flax (parity's
// own canonical names are read as Flax names), and throws InputError naming `origin` when it
// cannot tell.
// Also InputError, naming `origin`, for an empty `source` and for a tensor it keeps (mapped or
// unmapped) that is not F32 or F64: parameters and gradients are compared as numbers
// (compare/tensor_diff.h).
// `layer_model`: the case's layers model (infer_model_shapes), whose Flax paths are then the
// canonical names; nullptr for a widths model or no case ("dense0.kernel").
CanonicalParams to_canonical_params(const NamedTensors& source, ParamNaming naming,
                                    const std::string& origin,
                                    const ModelShapes* layer_model = nullptr);

struct NamedShape {
  std::string name;
  Shape shape;
};

struct ShapeMismatch {
  std::string name;
  Shape a, b;
};

// Which canonical names two sets share, and which they do not.
struct NameComparison {
  std::vector<std::string> matched;  // same name and shape
  std::vector<NamedShape> only_in_a, only_in_b;
  std::vector<ShapeMismatch> shape_differs;
  bool all_matched() const {
    return only_in_a.empty() && only_in_b.empty() && shape_differs.empty();
  }
};

NameComparison compare_param_names(const NamedTensors& a, const NamedTensors& b);

// The unmatched names side by side: shape mismatches first, then what only A and only B hold,
// row by row, each with its shape and, where a mapping renamed it, the source name; then why
// each unmapped source name has no rule. Empty when all names match.
std::string format_unmatched(const NameComparison& comparison, const std::string& label_a,
                             const CanonicalParams* mapped_a, const std::string& label_b,
                             const CanonicalParams* mapped_b);

}  // namespace parity::interop
