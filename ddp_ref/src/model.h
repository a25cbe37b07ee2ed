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

// The case's train.dtype ("f32", "bf16", "f16") as a torch dtype.
torch::ScalarType compute_dtype(const std::string& name);

class MlpImpl : public torch::nn::Module {
 public:
  // `compute`: the dtype the forward pass runs in. Other than float32 it is mixed precision as
  // seed 002 §3.4 writes it in JAX and the engine runs it: the f32 parameters (the master
  // weights the optimizer updates) and the input are cast to `compute` at the start of the
  // forward pass, every op runs in it, and compute_loss casts the loss back to f32. The casts
  // are differentiable, so the gradients reach the f32 parameters (and DDP's hooks) in f32.
  explicit MlpImpl(const ModelSpec& spec, torch::ScalarType compute = torch::kFloat);

  // x: [B, widths[0]] -> [B, widths.back()] in the compute dtype; the activation between
  // layers, none at the end.
  torch::Tensor forward(torch::Tensor x);

  // Parameters in torch's registration order, with their canonical names.
  const std::vector<std::string>& canonical_names() const { return canonical_names_; }

 private:
  std::vector<torch::nn::Linear> layers_;
  std::string activation_;
  torch::ScalarType compute_;
  std::vector<std::string> canonical_names_;
};
TORCH_MODULE(Mlp);

// Copies canonical tensors into the model. Every name must be present with the right shape
// and dtype F32; InputError names `origin` (the file), the tensor and the mismatch.
void load_canonical_params(Mlp& model, const NamedTensors& tensors, const std::string& origin);

// The model's parameters (or their gradients) under canonical names and layout.
NamedTensors export_canonical_params(Mlp& model);
NamedTensors export_canonical_grads(Mlp& model);

// Mean loss of the batch, in f32: softmax cross-entropy with integer labels, or mean squared
// error, computed in the outputs' dtype (regression targets cast to it) and then cast to f32.
torch::Tensor compute_loss(const ModelSpec& spec, const torch::Tensor& outputs,
                           const torch::Tensor& targets);

// A torch.optim optimizer configured from the case (SGD, Adam, AdamW).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainSpec& train,
                                                        const std::vector<torch::Tensor>& params);

}  // namespace parity::ddp_ref
