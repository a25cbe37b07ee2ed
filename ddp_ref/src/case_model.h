// The interface RankTrainer trains through, whichever form the case gives its model ([model]
// widths: Mlp; [model] layers: LayerModel), and the mapping of its tensors to canonical names
// and layouts (Flax's: docs/model-layers.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "dropout_stream.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

// How a torch parameter (or the rows of it that one canonical tensor holds) is laid out
// relative to its canonical (Flax) tensor. H heads of D features each, E = H * D.
enum class ParamLayout {
  kSame,       // biases, norm scales, cls, pos_embedding
  kLinear,     // Linear weight (out, in) <-> dense kernel (in, out)
  kConv2d,     // Conv2d weight OIHW <-> conv kernel HWIO
  kHeadsIn,    // in_proj_weight rows (H * D, E) <-> query/key/value kernel (E, H, D)
  kHeadsBias,  // in_proj_bias rows (H * D) <-> query/key/value bias (H, D)
  kHeadsOut,   // out_proj.weight (E, H * D) <-> out kernel (H, D, E)
};

// The rows [first, first + count) of a torch tensor's first axis; count 0: all of them.
// MultiheadAttention packs query, key and value into one in_proj_weight (3E, E) and one
// in_proj_bias (3E), each of them three canonical tensors.
struct TensorRows {
  int64_t first = 0;
  int64_t count = 0;
};

struct CanonicalParam {
  std::string name;  // "Conv_0/kernel", "dense0.bias"
  torch::Tensor tensor;  // the torch parameter, as parameters() lists it
  ParamLayout layout = ParamLayout::kSame;
  TensorRows rows;
  int64_t heads = 0;  // H, for the kHeads* layouts
};

// The part of `tensor` (the param's torch tensor, or its gradient) that `param` names, in
// torch's layout.
torch::Tensor canonical_part(const CanonicalParam& param, const torch::Tensor& tensor);

// A batch's layer outputs in Flax's layout (layer_intermediates.h).
struct CapturedIntermediates {
  HostTensor input;      // the rows as the model reads them: [B, model.input...]
  NamedTensors outputs;  // by intermediate path
};

class CaseModelImpl : public torch::nn::Module {
 public:
  // rows: the dataset's flat rows [B, D] -> the model's outputs [B, classes or targets].
  virtual torch::Tensor forward(torch::Tensor rows) = 0;

  // Every layer's output for `rows` in training mode with dropout off, the model's state left as
  // it was (a layers model; records_intermediates says which). InternalError for other models.
  virtual CapturedIntermediates capture_intermediates(const torch::Tensor& rows);

  // Every canonical tensor, their torch tensors met in the order of parameters() (the order
  // DDP's Reducer and the optimizer see them); a torch tensor packing several (in_proj_weight)
  // is named once per part, the parts of two packed tensors interleaved as Flax names them
  // (query kernel, query bias, key kernel, ...).
  const std::vector<CanonicalParam>& canonical_params() const { return canonical_params_; }

  // BatchNorm's running statistics under canonical names ("BatchNorm_0/mean", ".../var") in
  // Flax's convention; empty for a model without BatchNorm.
  virtual NamedTensors export_batch_stats() const { return {}; }

  // Where the training forward's dropout layers draw their masks (a layers model with dropout);
  // the trainer sets it once per rank.
  void set_dropout_stream(std::shared_ptr<DropoutStream> stream) { dropout_ = std::move(stream); }

 protected:
  std::shared_ptr<DropoutStream> dropout_;

  void add_canonical_param(std::string name, torch::Tensor tensor, ParamLayout layout,
                           TensorRows rows = {}, int64_t heads = 0);
  // Checks that the canonical tensors cover parameters() exactly and in order: each torch
  // tensor's first canonical part comes in parameters()' order, and its parts take its rows
  // in order, every row once.
  void check_canonical_params() const;

 private:
  std::vector<CanonicalParam> canonical_params_;
};

// The case's model: Mlp for widths, LayerModel for layers. `compute` is the forward pass's
// dtype (Mlp only; check_options refuses other than f32 for layers).
std::shared_ptr<CaseModelImpl> make_case_model(const ModelSpec& spec,
                                               torch::ScalarType compute = torch::kFloat);

// Copies canonical tensors into the model. Every name must be present with the right shape
// and dtype F32; InputError names `origin` (the file), the tensor and the mismatch.
void load_canonical_params(CaseModelImpl& model, const NamedTensors& tensors,
                           const std::string& origin);

// The model's parameters (or their gradients) under canonical names and layout.
NamedTensors export_canonical_params(const CaseModelImpl& model);
NamedTensors export_canonical_grads(const CaseModelImpl& model);

// A float tensor copied into a host tensor (F32) and back.
HostTensor to_host(const torch::Tensor& tensor);
torch::Tensor to_torch(const HostTensor& tensor);

}  // namespace parity::ddp_ref
