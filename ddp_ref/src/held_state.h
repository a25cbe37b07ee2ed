// What a DDP rank holds between steps, measured from the LibTorch tensors themselves: the
// module's parameters, each whole on every rank (DistributedDataParallel replicates the module),
// and the optimizer's per-parameter state tensors, each rank's own full copy (torch.optim keeps
// them beside each parameter: Adam's and AdamW's exp_avg and exp_avg_sq, SGD's momentum_buffer,
// RMSprop's square_avg, Adagrad's sum). LibTorch's C++ optimizers count their steps in an
// int64_t field, not a tensor, so the step counts are not bytes of tensors here.
#pragma once

#include <cstdint>
#include <vector>

#include "torch_pch.h"

namespace parity::ddp_ref {

// The bytes of the tensors' storage as laid out (numel x element size).
int64_t tensor_bytes(const std::vector<torch::Tensor>& tensors);

// The bytes of every state tensor `optimizer` holds (none before its first step).
int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

}  // namespace parity::ddp_ref
