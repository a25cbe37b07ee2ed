// The model's outputs on a whole test set, for the evaluation after training.
#pragma once

#include "case_model.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

// The outputs of `model` (in eval mode, without autograd) for the rows of `features` [N, D], in
// row order. The rows go through in fixed chunks spread over this machine's cores; each row's
// output depends on its own row only, so neither the chunk size nor the number of threads
// changes a bit of the result.
torch::Tensor evaluation_outputs(CaseModelImpl& model, const torch::Tensor& features);

}  // namespace parity::ddp_ref
