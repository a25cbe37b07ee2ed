#include "model.h"

#include <fmt/format.h>

#include <cstring>

#include "parity/common/error.h"

namespace parity::ddp_ref {
namespace {

bool is_kernel_slot(size_t param_index) { return param_index % 2 == 0; }

torch::Tensor to_torch(const HostTensor& tensor) {
  std::vector<int64_t> sizes(tensor.shape.begin(), tensor.shape.end());
  auto out = torch::empty(sizes, torch::kFloat32);
  std::memcpy(out.data_ptr<float>(), tensor.bytes.data(), tensor.num_bytes());
  return out;
}

HostTensor to_host(const torch::Tensor& tensor) {
  auto contiguous = tensor.detach().to(torch::kFloat32).contiguous();
  HostTensor out =
      HostTensor::zeros(DType::F32, Shape(contiguous.sizes().begin(), contiguous.sizes().end()));
  std::memcpy(out.bytes.data(), contiguous.data_ptr<float>(), out.num_bytes());
  return out;
}

// torch layout -> canonical layout: a Linear weight (out, in) becomes a kernel (in, out).
torch::Tensor to_canonical_layout(size_t param_index, const torch::Tensor& tensor) {
  return is_kernel_slot(param_index) ? tensor.t() : tensor;
}

NamedTensors export_canonical(Mlp& model, bool grads) {
  NamedTensors out;
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& source = grads ? params[i].grad() : params[i];
    PARITY_CHECK(source.defined());
    out.emplace(model->canonical_names()[i], to_host(to_canonical_layout(i, source)));
  }
  return out;
}

}  // namespace

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
    canonical_names_.push_back(fmt::format("dense{}.kernel", i));
    canonical_names_.push_back(fmt::format("dense{}.bias", i));
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

void load_canonical_params(Mlp& model, const NamedTensors& tensors, const std::string& origin) {
  torch::NoGradGuard no_grad;
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = model->canonical_names()[i];
    auto found = tensors.find(name);
    if (found == tensors.end()) {
      throw InputError(
          fmt::format("{}: no tensor '{}', which the case's model needs; make the file with "
                      "`parity init CASE --out FILE` for this case",
                      origin, name));
    }
    const HostTensor& tensor = found->second;
    // sizes() views the tensor's own storage: keep the canonical-layout tensor alive while
    // reading it (a temporary's sizes() dangled here, a heap use-after-free under ASan).
    const torch::Tensor canonical = to_canonical_layout(i, params[i]);
    Shape expected_shape(canonical.sizes().begin(), canonical.sizes().end());
    if (tensor.dtype != DType::F32 || tensor.shape != expected_shape) {
      throw InputError(fmt::format(
          "{}: tensor '{}' is {} {} but the case's model needs F32 {}; the file was made for "
          "another model (check model.widths)",
          origin, name, dtype_name(tensor.dtype), shape_to_string(tensor.shape),
          shape_to_string(expected_shape)));
    }
    auto value = to_torch(tensor);
    params[i].copy_(is_kernel_slot(i) ? value.t() : value);
  }
  if (tensors.size() != params.size()) {
    for (const auto& [name, tensor] : tensors) {
      const auto& names = model->canonical_names();
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        throw InputError(fmt::format(
            "{}: tensor '{}' is not a parameter of the case's model (it has {}); the file was "
            "made for another model",
            origin, name, fmt::join(names, ", ")));
      }
    }
  }
}

NamedTensors export_canonical_params(Mlp& model) { return export_canonical(model, false); }
NamedTensors export_canonical_grads(Mlp& model) { return export_canonical(model, true); }

torch::Tensor compute_loss(const ModelSpec& spec, const torch::Tensor& outputs,
                           const torch::Tensor& targets) {
  if (spec.loss == "softmax_cross_entropy") {
    return torch::nn::functional::cross_entropy(outputs, targets).to(torch::kFloat);
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
  throw InternalError("optimizer '" + train.optimizer + "' passed case validation");
}

}  // namespace parity::ddp_ref
