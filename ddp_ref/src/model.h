// The case's model as a torch::nn::Module, and its mapping to canonical parameter names.
//
// Canonical layout (Flax's): dense{i}.kernel is (in, out), dense{i}.bias is (out). torch's
// Linear stores weight as (out, in), so loading transposes and exporting transposes back.
#pragma once

#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelSpec& spec);

  // x: [B, widths[0]] -> [B, widths.back()]; the activation between layers, none at the end.
  torch::Tensor forward(torch::Tensor x);

  // Parameters in torch's registration order, with their canonical names.
  const std::vector<std::string>& canonical_names() const { return canonical_names_; }

 private:
  std::vector<torch::nn::Linear> layers_;
  std::string activation_;
  std::vector<std::string> canonical_names_;
};
TORCH_MODULE(Mlp);

// Copies canonical tensors into the model. Every name must be present with the right shape
// and dtype F32; InputError names `origin` (the file), the tensor and the mismatch.
void load_canonical_params(Mlp& model, const NamedTensors& tensors, const std::string& origin);

// The model's parameters (or their gradients) under canonical names and layout.
NamedTensors export_canonical_params(Mlp& model);
NamedTensors export_canonical_grads(Mlp& model);

// Mean loss of the batch: softmax cross-entropy with integer labels, or mean squared error.
torch::Tensor compute_loss(const ModelSpec& spec, const torch::Tensor& outputs,
                           const torch::Tensor& targets);

// A torch.optim optimizer configured from the case (SGD, Adam, AdamW).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainSpec& train,
                                                        const std::vector<torch::Tensor>& params);

}  // namespace parity::ddp_ref
