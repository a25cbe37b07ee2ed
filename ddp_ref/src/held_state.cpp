#include "held_state.h"

#include "parity/common/error.h"

namespace parity::ddp_ref {
namespace {

// The defined tensors among one parameter's state, for the optimizers ddp_ref builds
// (model.cpp, make_optimizer); an optional tensor (amsgrad's max_exp_avg_sq, RMSprop's
// momentum_buffer without momentum) is undefined when unused.
std::vector<torch::Tensor> state_tensors(const torch::optim::OptimizerParamState& state) {
  namespace optim = torch::optim;
  if (const auto* adam = dynamic_cast<const optim::AdamParamState*>(&state)) {
    return {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()};
  }
  if (const auto* adamw = dynamic_cast<const optim::AdamWParamState*>(&state)) {
    return {adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()};
  }
  if (const auto* sgd = dynamic_cast<const optim::SGDParamState*>(&state)) {
    return {sgd->momentum_buffer()};
  }
  if (const auto* rmsprop = dynamic_cast<const optim::RMSpropParamState*>(&state)) {
    return {rmsprop->square_avg(), rmsprop->momentum_buffer(), rmsprop->grad_avg()};
  }
  if (const auto* adagrad = dynamic_cast<const optim::AdagradParamState*>(&state)) {
    return {adagrad->sum()};
  }
  throw InternalError("optimizer_state_bytes: an optimizer state ddp_ref does not build");
}

}  // namespace

int64_t tensor_bytes(const std::vector<torch::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const torch::Tensor& tensor : tensors) {
    if (tensor.defined()) bytes += static_cast<int64_t>(tensor.nbytes());
  }
  return bytes;
}

int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) bytes += tensor_bytes(state_tensors(*state));
  return bytes;
}

}  // namespace parity::ddp_ref
