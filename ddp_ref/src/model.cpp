#include "model.h"

#include <fmt/format.h>

#include "parity/common/error.h"

namespace parity::ddp_ref {
torch::ScalarType compute_dtype(const std::string& name) {
  if (name == "f32") return torch::kFloat;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "f16") return torch::kHalf;
  throw InternalError("dtype '" + name + "' passed case validation");
}

MlpImpl::MlpImpl(const ModelSpec& spec, torch::ScalarType compute)
    : activation_(spec.activation), compute_(compute) {
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    layers_.push_back(register_module(fmt::format("dense{}", i),
                                      torch::nn::Linear(spec.widths[i], spec.widths[i + 1])));
    add_canonical_param(fmt::format("dense{}.kernel", i), layers_.back()->weight,
                        ParamLayout::kLinear);
    add_canonical_param(fmt::format("dense{}.bias", i), layers_.back()->bias, ParamLayout::kSame);
  }
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  const bool mixed = compute_ != torch::kFloat;
  if (mixed) x = x.to(compute_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    torch::nn::Linear& layer = layers_[i];
    x = mixed ? torch::nn::functional::linear(x, layer->weight.to(compute_),
                                              layer->bias.to(compute_))
              : layer->forward(x);
    if (i + 1 == layers_.size()) break;
    if (activation_ == "tanh") {
      x = torch::tanh(x);
    } else if (activation_ == "relu") {
      x = torch::relu(x);
    } else if (activation_ == "gelu") {
      x = torch::gelu(x);  // exact (erf) form, torch's default; JAX's default is the tanh form
    } else {
      throw InternalError("activation '" + activation_ + "' passed case validation");
    }
  }
  return x;
}

torch::Tensor compute_loss(const ModelSpec& spec, const torch::Tensor& outputs,
                           const torch::Tensor& targets) {
  if (spec.loss == "softmax_cross_entropy") {
    // torch's label smoothing is the "uniform" form: torch.nn.CrossEntropyLoss(label_smoothing=
    // eps) mixes the one-hot target with eps/C on every class and keeps H(q) in the loss
    // (aten/src/ATen/native/LossNLL.cpp cross_entropy_loss_label_smoothing). The Flax examples'
    // KL form has no torch loss; check_options refuses it before any rank starts.
    namespace F = torch::nn::functional;
    return F::cross_entropy(outputs, targets,
                            F::CrossEntropyFuncOptions().label_smoothing(spec.label_smoothing))
        .to(torch::kFloat);
  }
  if (spec.loss == "mse") {
    return torch::nn::functional::mse_loss(outputs, targets.to(outputs.scalar_type()))
        .to(torch::kFloat);
  }
  throw InternalError("loss '" + spec.loss + "' passed case validation");
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainSpec& train,
                                                        const std::vector<torch::Tensor>& params) {
  if (train.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(train.lr)
                                                           .momentum(train.momentum)
                                                           .nesterov(train.nesterov)
                                                           .weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(train.lr)
                                                            .betas({train.beta1, train.beta2})
                                                            .eps(train.eps)
                                                            .weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adamw") {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(train.lr)
                                                             .betas({train.beta1, train.beta2})
                                                             .eps(train.eps)
                                                             .weight_decay(train.weight_decay));
  }
  // torch/optim/rmsprop.py and adagrad.py: eps added after the square root, the only form
  // torch has (check_options refuses train.eps_in_sqrt = true before any rank starts).
  if (train.optimizer == "rmsprop") {
    return std::make_unique<torch::optim::RMSprop>(params, torch::optim::RMSpropOptions(train.lr)
                                                               .alpha(train.rms_decay)
                                                               .eps(train.eps)
                                                               .weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adagrad") {
    return std::make_unique<torch::optim::Adagrad>(
        params, torch::optim::AdagradOptions(train.lr)
                    .initial_accumulator_value(train.initial_accumulator_value)
                    .eps(train.eps)
                    .weight_decay(train.weight_decay));
  }
  throw InternalError("optimizer '" + train.optimizer + "' passed case validation");
}

}  // namespace parity::ddp_ref
