#include "layer_model.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "parity/common/error.h"
#include "parity/common/layer_intermediates.h"
#include "parity/common/layer_search.h"

namespace parity::ddp_ref {
namespace {

namespace F = torch::nn::functional;

// (low, high) padding of each spatial axis, as lax.padtype_to_pads computes SAME:
// out = ceil(in / stride), total = max((out - 1) * stride + window - in, 0), low = total / 2,
// high = total - low. SAME with stride > 1 pads more at the high end; torch's Conv2d and pools
// pad both ends alike, so such pads go through an explicit F::pad.
using SpatialPads = std::array<std::array<int64_t, 2>, 2>;

SpatialPads spatial_pads(const LayerSpec& layer, const std::vector<int64_t>& input) {
  SpatialPads pads{};
  for (size_t axis = 0; axis < 2; ++axis) {
    if (layer.padding.mode == "VALID") continue;
    if (layer.padding.mode != "SAME") {
      pads[axis] = layer.padding.pairs[axis];
      continue;
    }
    const int64_t stride = layer.strides.empty() ? 1 : layer.strides[axis];
    const int64_t out = (input[axis] + stride - 1) / stride;
    const int64_t total =
        std::max<int64_t>((out - 1) * stride + layer.kernel[axis] - input[axis], 0);
    pads[axis] = {total / 2, total - total / 2};
  }
  return pads;
}

bool is_symmetric(const SpatialPads& pads) {
  return pads[0][0] == pads[0][1] && pads[1][0] == pads[1][1];
}

bool is_zero(const SpatialPads& pads) {
  return is_symmetric(pads) && pads[0][0] == 0 && pads[1][0] == 0;
}

// x (NCHW) padded with `value` as the pads say.
torch::Tensor pad_spatial(const torch::Tensor& x, const SpatialPads& pads, double value) {
  if (is_zero(pads)) return x;
  return F::pad(x, F::PadFuncOptions({pads[1][0], pads[1][1], pads[0][0], pads[0][1]})
                       .mode(torch::kConstant)
                       .value(value));
}

torch::ExpandingArray<2> window_strides(const LayerSpec& layer) {
  if (layer.strides.empty()) return torch::ExpandingArray<2>(1);
  return torch::ExpandingArray<2>({layer.strides[0], layer.strides[1]});
}

// Flax applies dense and layer_norm to the last axis, the channels of an NHWC image: an NCHW
// activation goes channels-last for them and back.
torch::Tensor on_channels(const torch::Tensor& x,
                          const std::function<torch::Tensor(const torch::Tensor&)>& fn) {
  if (x.dim() != 4) return fn(x);
  return fn(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
}

template <typename Layers>
torch::Tensor run_layers(const Layers& layers, torch::Tensor x) {
  for (const auto& layer : layers) x = layer(x);
  return x;
}

// The shape in torch's layout of the part of a torch tensor that holds a canonical tensor of
// shape `c` (H heads of D features, E features: docs/model-layers.md).
std::vector<int64_t> torch_shape(const std::vector<int64_t>& c, ParamLayout layout) {
  switch (layout) {
    case ParamLayout::kLinear:
      return {c[1], c[0]};
    case ParamLayout::kConv2d:
      return {c[3], c[2], c[0], c[1]};
    case ParamLayout::kHeadsIn:  // (E, H, D) <- (H * D, E)
      return {c[1] * c[2], c[0]};
    case ParamLayout::kHeadsBias:  // (H, D) <- (H * D)
      return {c[0] * c[1]};
    case ParamLayout::kHeadsOut:  // (H, D, E) <- (E, H * D)
      return {c[2], c[0] * c[1]};
    case ParamLayout::kSame:
      break;
  }
  return c;
}

// H, for the layouts that split heads.
int64_t heads_of(const std::vector<int64_t>& canonical, ParamLayout layout) {
  if (layout == ParamLayout::kHeadsIn) return canonical[1];
  if (layout == ParamLayout::kHeadsBias || layout == ParamLayout::kHeadsOut) return canonical[0];
  return 0;
}

}  // namespace

// One BatchNorm's running statistics and what converting them needs.
struct LayerModelImpl::BatchNormState {
  std::string mean_name;
  std::string var_name;
  double momentum = 0;  // the case's, Flax's convention
  torch::Tensor running_mean;
  torch::Tensor running_var;
  torch::Tensor num_batches_tracked;
  int64_t batch_elements = 0;  // values per channel in the last training batch
};

LayerModelImpl::LayerModelImpl(const ModelSpec& spec)
    : input_(spec.input),
      dropout_sites_(dropout_sites(spec)),
      shapes_(infer_model_shapes(spec.layers, spec.input)) {
  std::vector<int64_t> shape = input_;
  layers_ = build(spec.layers, shape, "");
  PARITY_CHECK(next_param_ == shapes_.params.size() && next_stat_ == shapes_.batch_stats.size());
  // DDP's Reducer and the optimizer see parameters(); the canonical names must follow it.
  check_canonical_params();
}

torch::Tensor LayerModelImpl::image(const torch::Tensor& rows) const {
  std::vector<int64_t> sizes = {rows.size(0)};
  sizes.insert(sizes.end(), input_.begin(), input_.end());
  return rows.reshape(sizes);
}

torch::Tensor LayerModelImpl::forward(torch::Tensor rows) {
  torch::Tensor x = image(rows);
  // NHWC -> NCHW with NCHW's own strides, as a DataLoader's batch has them. A permuted view reads
  // as channels-last to torch (suggest_memory_format), which switches the convolutions and
  // BatchNorm to other kernels, and DDP's gradient buckets to mismatched strides. contiguous()
  // is not enough: with one channel the permuted view already counts as contiguous (size-1
  // dimensions have no stride to check) and is returned as it is, channels-last strides and
  // all. A copy with the default format's strides is what the DataLoader would give.
  if (x.dim() == 4) x = x.permute({0, 3, 1, 2}).clone(torch::MemoryFormat::Contiguous);
  return run_layers(layers_, x);
}

// LibTorch's modules have no forward hooks (torch/nn/modules/module.py's register_forward_hook
// is Python's; pytorch/pytorch#25888 asks for them in C++), so each layer built by build() keeps
// its own output when a capture is on, where a forward hook would see it: after the layer ran.
CapturedIntermediates LayerModelImpl::capture_intermediates(const torch::Tensor& rows) {
  torch::NoGradGuard no_grad;
  // A training forward updates BatchNorm's running statistics: keep them as the step left them.
  struct Saved {
    torch::Tensor mean, var, batches;
    int64_t batch_elements;
  };
  std::vector<Saved> saved;
  for (const auto& state : batch_norms_) {
    saved.push_back({state->running_mean.clone(), state->running_var.clone(),
                     state->num_batches_tracked.clone(), state->batch_elements});
  }
  CapturedIntermediates out{to_host(image(rows)), {}};
  captured_ = &out.outputs;
  try {
    forward(rows);
  } catch (...) {
    captured_ = nullptr;
    throw;
  }
  captured_ = nullptr;
  for (size_t i = 0; i < saved.size(); ++i) {
    BatchNormState& state = *batch_norms_[i];
    state.running_mean.copy_(saved[i].mean);
    state.running_var.copy_(saved[i].var);
    state.num_batches_tracked.copy_(saved[i].batches);
    state.batch_elements = saved[i].batch_elements;
  }
  return out;
}

LayerModelImpl::Layer LayerModelImpl::recorded(const std::string& path, const std::string& kind,
                                               Layer layer) {
  const std::optional<std::string> output = intermediate_output_path(path, kind);
  if (!output) return layer;
  return [this, output = *output, layer = std::move(layer)](const torch::Tensor& x) {
    torch::Tensor y = layer(x);
    // Flax's layout: NCHW activations go channels-last, as the parameters do.
    if (captured_ != nullptr) {
      captured_->insert_or_assign(output, to_host(y.dim() == 4 ? y.permute({0, 2, 3, 1}) : y));
    }
    return y;
  };
}

template <typename Holder>
Holder LayerModelImpl::add_module(Holder module) {
  return register_module(fmt::format("layer{}", children().size()), std::move(module));
}

// Module::parameters() lists a module's own parameters before its submodules'
// (torch/csrc/api/src/nn/module.cpp: named_parameters walks apply(), the module first), so a
// parameter registered on the model itself would come first rather than at its layer: each
// one is a one-entry ParameterDict, registered in layer order like the other modules.
torch::Tensor LayerModelImpl::add_parameter(const std::string& name, torch::Tensor initial) {
  auto holder = add_module(torch::nn::ParameterDict());
  return holder->insert(name, initial.requires_grad_());
}

void LayerModelImpl::take_param(const torch::Tensor& tensor, ParamLayout layout,
                                TensorRows rows) {
  PARITY_CHECK(next_param_ < shapes_.params.size());
  const ModelTensor& canonical = shapes_.params[next_param_++];
  add_canonical_param(canonical.name, tensor, layout, rows, heads_of(canonical.shape, layout));
  PARITY_CHECK(canonical_part(canonical_params().back(), tensor).sizes().vec() ==
               torch_shape(canonical.shape, layout));
}

std::vector<LayerModelImpl::Layer> LayerModelImpl::build(const std::vector<LayerSpec>& layers,
                                                         std::vector<int64_t>& shape,
                                                         const std::string& prefix) {
  std::vector<Layer> built;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& layer = layers[i];
    const std::string path = intermediate_path(prefix, i, layers.size(), layer.kind);
    built.push_back(recorded(path, layer.kind, build_layer(layer, shape, path)));
    shape = infer_model_shapes({layer}, shape).output;
  }
  return built;
}

LayerModelImpl::Layer LayerModelImpl::build_layer(const LayerSpec& layer,
                                                  const std::vector<int64_t>& input,
                                                  const std::string& path) {
  const std::string& kind = layer.kind;
  if (kind == "dense") return dense(layer, input);
  if (kind == "conv") return conv(layer, input);
  if (kind == "batch_norm") return batch_norm(layer, input);
  if (kind == "layer_norm") return layer_norm(layer, input);
  if (kind == "residual") return residual(layer, input, path);
  if (kind == "mlp_block") return mlp_block(layer, input, path);
  if (kind == "max_pool" || kind == "avg_pool") {
    const SpatialPads pads = spatial_pads(layer, input);
    const torch::ExpandingArray<2> window({layer.kernel[0], layer.kernel[1]});
    const torch::ExpandingArray<2> strides = window_strides(layer);
    if (kind == "max_pool") {
      // lax.reduce_window pads with max's identity, -inf.
      return [=](const torch::Tensor& x) {
        return F::max_pool2d(pad_spatial(x, pads, -std::numeric_limits<double>::infinity()),
                             F::MaxPool2dFuncOptions(window).stride(strides));
      };
    }
    auto average = [=](const torch::Tensor& x) {
      return F::avg_pool2d(pad_spatial(x, pads, 0.0),
                           F::AvgPool2dFuncOptions(window).stride(strides));
    };
    if (layer.count_include_pad || is_zero(pads)) return average;
    // flax.linen.avg_pool(count_include_pad=False): the window sum over the count of real
    // (unpadded) values in it.
    return [=](const torch::Tensor& x) {
      return average(x) / average(torch::ones({1, 1, x.size(2), x.size(3)}, x.options()));
    };
  }
  if (kind == "global_avg_pool") return [](const torch::Tensor& x) { return x.mean({2, 3}); };
  if (kind == "flatten") {
    // Flax flattens NHWC: go channels-last first so the features come in the same order.
    return [](const torch::Tensor& x) {
      return (x.dim() == 4 ? x.permute({0, 2, 3, 1}) : x).flatten(1);
    };
  }
  if (kind == "relu") return [](const torch::Tensor& x) { return torch::relu(x); };
  if (kind == "tanh") return [](const torch::Tensor& x) { return torch::tanh(x); };
  if (kind == "silu") return [](const torch::Tensor& x) { return torch::silu(x); };
  if (kind == "gelu") {
    const std::string approximate = layer.approximate ? "tanh" : "none";
    return [approximate](const torch::Tensor& x) { return torch::gelu(x, approximate); };
  }
  if (kind == "dropout") {
    if (layer.rate == 0) return [](const torch::Tensor& x) { return x; };
    // The sites come in the order the layers are built, branch before projection.
    PARITY_CHECK(next_dropout_ < dropout_sites_.size());
    const DropoutSite site = dropout_sites_[next_dropout_++];
    return [this, site](const torch::Tensor& x) {
      if (!is_training() || captured_ != nullptr) return x;  // a capture runs without dropout
      if (dropout_ == nullptr) {
        throw InternalError("dropout at " + site.path + " trains without a DropoutStream");
      }
      return dropout_->apply(site, x);
    };
  }
  return transformer_layer(layer, input);
}

// Tokens are (batch, tokens, features) from patch_embed on; dense and layer_norm apply to their
// last axis as they are.
LayerModelImpl::Layer LayerModelImpl::transformer_layer(const LayerSpec& layer,
                                                        const std::vector<int64_t>& input) {
  const std::string& kind = layer.kind;
  if (kind == "patch_embed") return patch_embed(layer, input);
  if (kind == "class_token") return class_token(input);
  if (kind == "pos_embed") return pos_embed(input);
  if (kind == "attention") return attention(layer, input);
  if (kind == "mean_tokens") return [](const torch::Tensor& x) { return x.mean(1); };
  if (kind == "take_class_token") return [](const torch::Tensor& x) { return x.select(1, 0); };
  throw InternalError("layer kind '" + kind + "' passed case validation");
}

LayerModelImpl::Layer LayerModelImpl::dense(const LayerSpec& layer,
                                            const std::vector<int64_t>& input) {
  auto linear = add_module(torch::nn::Linear(
      torch::nn::LinearOptions(input.back(), layer.features).bias(layer.use_bias)));
  take_param(linear->weight, ParamLayout::kLinear);
  if (layer.use_bias) take_param(linear->bias, ParamLayout::kSame);
  return [linear = linear.ptr()](const torch::Tensor& x) {
    return on_channels(x, [&](const torch::Tensor& y) { return linear->forward(y); });
  };
}

LayerModelImpl::Layer LayerModelImpl::conv(const LayerSpec& layer,
                                           const std::vector<int64_t>& input) {
  const SpatialPads pads = spatial_pads(layer, input);
  const bool symmetric = is_symmetric(pads);
  auto options =
      torch::nn::Conv2dOptions(input[2], layer.features, {layer.kernel[0], layer.kernel[1]})
          .stride(window_strides(layer))
          .bias(layer.use_bias);
  if (symmetric) options.padding(torch::ExpandingArray<2>({pads[0][0], pads[1][0]}));
  auto conv = add_module(torch::nn::Conv2d(options));
  take_param(conv->weight, ParamLayout::kConv2d);
  if (layer.use_bias) take_param(conv->bias, ParamLayout::kSame);
  if (symmetric) return [conv = conv.ptr()](const torch::Tensor& x) { return conv->forward(x); };
  return [conv = conv.ptr(), pads](const torch::Tensor& x) {
    return conv->forward(pad_spatial(x, pads, 0.0));
  };
}

LayerModelImpl::Layer LayerModelImpl::batch_norm(const LayerSpec& layer,
                                                 const std::vector<int64_t>& input) {
  // torch's momentum weighs the new batch value, Flax's the old average
  // (torch/nn/modules/batchnorm.py, _BatchNorm.forward; flax/linen/normalization.py).
  const auto options =
      torch::nn::BatchNormOptions(input.back()).momentum(1.0 - layer.momentum).eps(layer.epsilon);
  auto state = std::make_shared<BatchNormState>();
  PARITY_CHECK(next_stat_ + 1 < shapes_.batch_stats.size());
  state->mean_name = shapes_.batch_stats[next_stat_++].name;
  state->var_name = shapes_.batch_stats[next_stat_++].name;
  state->momentum = layer.momentum;
  batch_norms_.push_back(state);
  Layer normalize;
  const auto keep = [&](auto bn) {
    take_param(bn->weight, ParamLayout::kSame);
    take_param(bn->bias, ParamLayout::kSame);
    state->running_mean = bn->running_mean;
    state->running_var = bn->running_var;
    state->num_batches_tracked = bn->num_batches_tracked;
    normalize = [bn = bn.ptr()](const torch::Tensor& x) { return bn->forward(x); };
  };
  if (input.size() == 3) {
    keep(add_module(torch::nn::BatchNorm2d(options)));
  } else {
    keep(add_module(torch::nn::BatchNorm1d(options)));
  }
  return [this, state, normalize](const torch::Tensor& x) {
    if (is_training()) state->batch_elements = x.numel() / x.size(1);
    return normalize(x);
  };
}

LayerModelImpl::Layer LayerModelImpl::layer_norm(const LayerSpec& layer,
                                                 const std::vector<int64_t>& input) {
  auto norm = add_module(
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({input.back()}).eps(layer.epsilon)));
  take_param(norm->weight, ParamLayout::kSame);
  take_param(norm->bias, ParamLayout::kSame);
  return [norm = norm.ptr()](const torch::Tensor& x) {
    return on_channels(x, [&](const torch::Tensor& y) { return norm->forward(y); });
  };
}

LayerModelImpl::Layer LayerModelImpl::residual(const LayerSpec& layer,
                                               const std::vector<int64_t>& input,
                                               const std::string& path) {
  // Branch first, then the projection: the order infer_model_shapes names their parameters in.
  std::vector<int64_t> branch_shape = input;
  std::vector<Layer> branch = build(layer.layers, branch_shape, intermediate_branch_prefix(path));
  std::vector<int64_t> shortcut_shape = input;
  std::vector<Layer> shortcut =
      build(layer.projection, shortcut_shape, intermediate_projection_prefix(path));
  return [branch, shortcut](const torch::Tensor& x) {
    torch::Tensor y = run_layers(branch, x);
    return run_layers(shortcut, x) + y;
  };
}

// Flax: nn.Conv(kernel_size=strides=patch, padding="VALID"), then x.reshape((n, h * w, c))
// (vit_jax/models_vit.py, VisionTransformer); torch: Conv2d(stride=patch), then
// flatten(2).transpose(1, 2) (torchvision/models/vision_transformer.py,
// VisionTransformer._process_input). Both list the patches row-major over (h, w).
LayerModelImpl::Layer LayerModelImpl::patch_embed(const LayerSpec& layer,
                                                  const std::vector<int64_t>& input) {
  LayerSpec patches = layer;
  patches.strides = layer.kernel;
  patches.padding = LayerPadding{};  // VALID
  const Layer embed = conv(patches, input);
  return [embed](const torch::Tensor& x) { return embed(x).flatten(2).transpose(1, 2); };
}

// torchvision's VisionTransformer: class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim)),
// expanded over the batch and put before the tokens (torch.cat(..., dim=1)), as
// vit_jax/models_vit.py prepends its zero-initialised `cls`.
LayerModelImpl::Layer LayerModelImpl::class_token(const std::vector<int64_t>& input) {
  const torch::Tensor cls = add_parameter("cls", torch::zeros({1, 1, input.back()}));
  take_param(cls, ParamLayout::kSame);
  return [cls](const torch::Tensor& x) {
    return torch::cat({cls.expand({x.size(0), -1, -1}), x}, 1);
  };
}

// torchvision's Encoder: pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim)
// .normal_(std=0.02)), drawn from the default generator at construction, and added
// (vit_jax/models_vit.py, AddPositionEmbs).
LayerModelImpl::Layer LayerModelImpl::pos_embed(const std::vector<int64_t>& input) {
  const torch::Tensor pos_embedding =
      add_parameter("pos_embedding", torch::empty({1, input[0], input[1]}).normal_(0.0, 0.02));
  take_param(pos_embedding, ParamLayout::kSame);
  return [pos_embedding](const torch::Tensor& x) { return x + pos_embedding; };
}

// Self-attention as a PyTorch user has it: torch::nn::MultiheadAttention, query, key and value
// packed into in_proj_weight (3E, E) and in_proj_bias (3E); Flax's query, key and value are
// their rows [0, E), [E, 2E) and [2E, 3E), the order multi_head_attention_forward chunks the
// packed projection in. Both scale the projected query (bias included) by 1/sqrt(D), D = E / H,
// before its dot product with the keys: Flax divides (flax/linen/attention.py,
// dot_product_attention_weights: query / jnp.sqrt(depth)), torch's Python divides
// (torch/nn/functional.py, multi_head_attention_forward: q / math.sqrt(E), E its head dim) and
// LibTorch multiplies by 1 / std::sqrt(head_dim) (torch/nn/functional/activation.h,
// multi_head_attention_forward): the same rounding when sqrt(D) is a power of two, as for
// vit-fmnist's D = 16, within an ulp of the scaled query otherwise.
LayerModelImpl::Layer LayerModelImpl::attention(const LayerSpec& layer,
                                                const std::vector<int64_t>& input) {
  const int64_t width = input.back();
  auto mha = add_module(torch::nn::MultiheadAttention(
      torch::nn::MultiheadAttentionOptions(width, layer.heads).dropout(layer.rate)));
  for (int64_t i = 0; i < 3; ++i) {  // query, key, value
    take_param(mha->in_proj_weight, ParamLayout::kHeadsIn, {i * width, width});
    take_param(mha->in_proj_bias, ParamLayout::kHeadsBias, {i * width, width});
  }
  take_param(mha->out_proj->weight, ParamLayout::kHeadsOut);
  take_param(mha->out_proj->bias, ParamLayout::kSame);
  return [mha = mha.ptr()](const torch::Tensor& x) {
    // LibTorch 1.13's MultiheadAttentionOptions has no batch_first: it reads (L, N, E).
    const torch::Tensor sequence_first = x.transpose(0, 1);
    return std::get<0>(mha->forward(sequence_first, sequence_first, sequence_first, {},
                                    /*need_weights=*/false))
        .transpose(0, 1);
  };
}

// vit_jax/models_vit.py MlpBlock (without its dropout): Dense(mlp_dim) -> gelu -> Dense(width),
// as torchvision's MLPBlock: Linear -> GELU -> Linear. The two dense layers take the next
// canonical names, MlpBlock_i/Dense_0 and MlpBlock_i/Dense_1.
LayerModelImpl::Layer LayerModelImpl::mlp_block(const LayerSpec& layer,
                                                const std::vector<int64_t>& input,
                                                const std::string& path) {
  std::vector<int64_t> shape = input;
  const std::vector<Layer> layers =
      build(mlp_block_layers(layer, input.back()), shape, intermediate_branch_prefix(path));
  return [layers](const torch::Tensor& x) { return run_layers(layers, x); };
}

NamedTensors LayerModelImpl::export_batch_stats() const {
  NamedTensors out;
  for (const auto& state : batch_norms_) {
    out.emplace(state->mean_name, to_host(state->running_mean));
    out.emplace(state->var_name,
                to_host(flax_running_var(state->running_var, state->momentum,
                                         state->num_batches_tracked.item<int64_t>(),
                                         state->batch_elements)));
  }
  return out;
}

// Both start at var_0 = 1. With m the case's (Flax's) momentum, s2 a batch's biased variance
// and n its values per channel, torch keeps (momentum 1 - m, the unbiased variance)
//   v_t = m v_{t-1} + (1 - m) s2_t n / (n - 1)
// and Flax
//   f_t = m f_{t-1} + (1 - m) s2_t.
// Claim: f_t = v_t (n - 1) / n + m^t / n. At t = 0: (n - 1) / n + 1 / n = 1. If it holds at
// t - 1: v_t (n - 1) / n + m^t / n = m (v_{t-1} (n - 1) / n + m^{t-1} / n) + (1 - m) s2_t
// = m f_{t-1} + (1 - m) s2_t = f_t. Exact only while every batch has the same n (a smaller
// last batch breaks the factor (n - 1) / n); up to float rounding.
torch::Tensor flax_running_var(const torch::Tensor& torch_var, double momentum, int64_t batches,
                               int64_t batch_elements) {
  if (batches == 0) return torch_var;
  const double n = static_cast<double>(batch_elements);
  return (torch_var.to(torch::kFloat64) * ((n - 1) / n) + std::pow(momentum, batches) / n)
      .to(torch_var.scalar_type());
}

void check_layers_trainable(const CaseSpec& spec) {
  if (spec.model.layers.empty()) return;
  if (find_layer(spec.model.layers,
                 [](const LayerSpec& layer) { return layer.kind == "batch_norm" && layer.sync; })) {
    // torch.nn.SyncBatchNorm is CUDA-only in PyTorch 1.13 (torch/nn/modules/batchnorm.py,
    // SyncBatchNorm.forward: "SyncBatchNorm expected input tensor to be on GPU"; DDP's
    // _passing_sync_batchnorm_handle refuses it on CPU modules) and LibTorch's C++ API has none.
    throw InputError(fmt::format(
        "case {}: a batch_norm layer has sync = true (SyncBatchNorm), which ddp_ref cannot "
        "train: PyTorch 1.13's SyncBatchNorm runs on CUDA only and LibTorch has no C++ one; "
        "use sync = false (per-replica statistics, DDP's default)",
        spec.name));
  }
}

}  // namespace parity::ddp_ref
