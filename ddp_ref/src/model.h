// A widths model ([model] widths) as a torch::nn::Module, the case's loss and its optimizer.
//
// Canonical layout (Flax's): dense{i}.kernel is (in, out), dense{i}.bias is (out). torch's
// Linear stores weight as (out, in), so loading transposes and exporting transposes back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "case_model.h"
#include "parity/common/case_spec.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

// The case's train.dtype ("f32", "bf16", "f16") as a torch dtype.
torch::ScalarType compute_dtype(const std::string& name);

class MlpImpl : public CaseModelImpl {
 public:
  // `compute`: the dtype the forward pass runs in. Other than float32 it is mixed precision as
  // seed 002 §3.4 writes it in JAX and the engine runs it: the f32 parameters (the master
  // weights the optimizer updates) and the input are cast to `compute` at the start of the
  // forward pass, every op runs in it, and compute_loss casts the loss back to f32. The casts
  // are differentiable, so the gradients reach the f32 parameters (and DDP's hooks) in f32.
  explicit MlpImpl(const ModelSpec& spec, torch::ScalarType compute = torch::kFloat);

  // x: [B, widths[0]] -> [B, widths.back()] in the compute dtype; the activation between
  // layers, none at the end.
  torch::Tensor forward(torch::Tensor x) override;

 private:
  std::vector<torch::nn::Linear> layers_;
  std::string activation_;
  torch::ScalarType compute_;
};
TORCH_MODULE(Mlp);

// Mean loss of the batch, in f32: softmax cross-entropy with integer labels (label-smoothed as
// torch's CrossEntropyLoss(label_smoothing) smooths), or mean squared error, computed in the
// outputs' dtype (regression targets cast to it) and then cast to f32.
torch::Tensor compute_loss(const ModelSpec& spec, const torch::Tensor& outputs,
                           const torch::Tensor& targets);

// A torch.optim optimizer configured from the case (SGD, Adam, AdamW).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainSpec& train,
                                                        const std::vector<torch::Tensor>& params);

}  // namespace parity::ddp_ref
