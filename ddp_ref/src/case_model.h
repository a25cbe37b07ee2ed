// The interface RankTrainer trains through, whichever form the case gives its model ([model]
// widths: Mlp; [model] layers: LayerModel), and the mapping of its tensors to canonical names
// and layouts (Flax's: docs/model-layers.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

// How a torch parameter is laid out relative to its canonical (Flax) tensor.
enum class ParamLayout {
  kSame,    // biases, norm scales
  kLinear,  // Linear weight (out, in) <-> dense kernel (in, out)
  kConv2d,  // Conv2d weight OIHW <-> conv kernel HWIO
};

struct CanonicalParam {
  std::string name;  // "Conv_0/kernel", "dense0.bias"
  torch::Tensor tensor;
  ParamLayout layout = ParamLayout::kSame;
};

class CaseModelImpl : public torch::nn::Module {
 public:
  // rows: the dataset's flat rows [B, D] -> the model's outputs [B, classes or targets].
  virtual torch::Tensor forward(torch::Tensor rows) = 0;

  // Every parameter, in the order of parameters() (the order DDP's Reducer and the optimizer
  // see them).
  const std::vector<CanonicalParam>& canonical_params() const { return canonical_params_; }

  // BatchNorm's running statistics under canonical names ("BatchNorm_0/mean", ".../var") in
  // Flax's convention; empty for a model without BatchNorm.
  virtual NamedTensors export_batch_stats() const { return {}; }

 protected:
  void add_canonical_param(std::string name, torch::Tensor tensor, ParamLayout layout);

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
