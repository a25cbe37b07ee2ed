// A layers model ([model] layers, docs/model-layers.md) as LibTorch modules: each layer kind as
// the LibTorch module the design's table names, computing what its Flax module computes on the
// same canonical parameters.
//
// Activations run NCHW (torch's layout): the dataset's flat rows are reshaped to [model] input
// (NHWC, as Flax reads them) and permuted to NCHW once; the layers that read the channel axis
// last in Flax (dense, layer_norm, flatten) move it back where Flax has it. Tokens are
// (batch, tokens, features) in both frameworks, from patch_embed on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "case_model.h"
#include "parity/common/model_layers.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

class LayerModelImpl : public CaseModelImpl {
 public:
  explicit LayerModelImpl(const ModelSpec& spec);

  torch::Tensor forward(torch::Tensor rows) override;
  CapturedIntermediates capture_intermediates(const torch::Tensor& rows) override;

  // Rank's BatchNorm running statistics in Flax's convention (flax_running_var).
  NamedTensors export_batch_stats() const override;

 private:
  using Layer = std::function<torch::Tensor(const torch::Tensor&)>;
  struct BatchNormState;

  // rows [B, D] reshaped to [model] input: [B, H, W, C] for an image (Flax's layout).
  torch::Tensor image(const torch::Tensor& rows) const;
  // Builds `layers` on an input of one sample's shape `shape` (NHWC without N); on return
  // `shape` is their output's. `prefix`: the list's intermediate paths' (layer_intermediates.h).
  std::vector<Layer> build(const std::vector<LayerSpec>& layers, std::vector<int64_t>& shape,
                           const std::string& prefix);
  // `path`: the layer's intermediate path.
  Layer build_layer(const LayerSpec& layer, const std::vector<int64_t>& input,
                    const std::string& path);
  // `layer`, keeping its output under its intermediate path while a capture is on.
  Layer recorded(const std::string& path, const std::string& kind, Layer layer);
  Layer transformer_layer(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer dense(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer conv(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer batch_norm(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer layer_norm(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer residual(const LayerSpec& layer, const std::vector<int64_t>& input,
                 const std::string& path);
  Layer patch_embed(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer class_token(const std::vector<int64_t>& input);
  Layer pos_embed(const std::vector<int64_t>& input);
  Layer attention(const LayerSpec& layer, const std::vector<int64_t>& input);
  Layer mlp_block(const LayerSpec& layer, const std::vector<int64_t>& input,
                  const std::string& path);

  // Registers a submodule under a unique torch name.
  template <typename Holder>
  Holder add_module(Holder module);
  // A parameter of its own (cls, pos_embedding), `initial` its value, in a submodule of its own.
  torch::Tensor add_parameter(const std::string& name, torch::Tensor initial);
  // Names `rows` of `tensor` (all of it by default) with the next canonical parameter name
  // infer_model_shapes gave, checking that the two agree on its shape.
  void take_param(const torch::Tensor& tensor, ParamLayout layout, TensorRows rows = {});

  std::vector<int64_t> input_;
  std::vector<DropoutSite> dropout_sites_;  // in build order
  size_t next_dropout_ = 0;
  ModelShapes shapes_;  // the canonical names, in the order the layers are built
  size_t next_param_ = 0;
  size_t next_stat_ = 0;
  std::vector<Layer> layers_;
  std::vector<std::shared_ptr<BatchNormState>> batch_norms_;
  NamedTensors* captured_ = nullptr;  // while capture_intermediates runs
};
TORCH_MODULE(LayerModel);

// Flax's BatchNorm running variance from torch's, for a case momentum `momentum` (Flax's: it
// weighs the old average), after `batches` training batches of `batch_elements` values per
// channel each (torch's num_batches_tracked; N*H*W).
torch::Tensor flax_running_var(const torch::Tensor& torch_var, double momentum, int64_t batches,
                               int64_t batch_elements);

// InputError for what ddp_ref cannot train in a layers model that the engine can (the case
// checker refuses what neither trains): sync = true BatchNorm.
void check_layers_trainable(const CaseSpec& spec);

}  // namespace parity::ddp_ref
