#include "case_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "layer_model.h"
#include "model.h"
#include "parity/common/error.h"

namespace parity::ddp_ref {
namespace {

// A torch part in the canonical layout. The kHeads* layouts split torch's H * D axis into
// Flax's (H, D), head-major: torch's MultiheadAttention views its projections as
// (L, N * H, D) (torch/nn/functional.py, multi_head_attention_forward), Flax's DenseGeneral
// kernels are (E, H, D) (flax/linen/attention.py, MultiHeadDotProductAttention.__call__).
torch::Tensor to_canonical_layout(const CanonicalParam& param, const torch::Tensor& part) {
  switch (param.layout) {
    case ParamLayout::kLinear:
      return part.t();
    case ParamLayout::kConv2d:
      return part.permute({2, 3, 1, 0});  // OIHW -> HWIO
    case ParamLayout::kHeadsIn:
      return part.t().reshape({part.size(1), param.heads, -1});
    case ParamLayout::kHeadsBias:
      return part.reshape({param.heads, -1});
    case ParamLayout::kHeadsOut:
      return part.t().reshape({param.heads, -1, part.size(0)});
    case ParamLayout::kSame:
      break;
  }
  return part;
}

torch::Tensor from_canonical_layout(const CanonicalParam& param, const torch::Tensor& tensor) {
  switch (param.layout) {
    case ParamLayout::kLinear:
      return tensor.t();
    case ParamLayout::kConv2d:
      return tensor.permute({3, 2, 0, 1});  // HWIO -> OIHW
    case ParamLayout::kHeadsIn:
      return tensor.reshape({tensor.size(0), -1}).t();
    case ParamLayout::kHeadsBias:
      return tensor.reshape({-1});
    case ParamLayout::kHeadsOut:
      return tensor.reshape({-1, tensor.size(2)}).t();
    case ParamLayout::kSame:
      break;
  }
  return tensor;
}

std::string model_fields(const CaseModelImpl& model) {
  return dynamic_cast<const MlpImpl*>(&model) != nullptr ? "model.widths" : "model.layers";
}

NamedTensors export_canonical(const CaseModelImpl& model, bool grads) {
  NamedTensors out;
  for (const CanonicalParam& param : model.canonical_params()) {
    const torch::Tensor& source = grads ? param.tensor.grad() : param.tensor;
    PARITY_CHECK(source.defined());
    out.emplace(param.name, to_host(to_canonical_layout(param, canonical_part(param, source))));
  }
  return out;
}

}  // namespace

CapturedIntermediates CaseModelImpl::capture_intermediates(const torch::Tensor&) {
  throw InternalError("only a layers model records its layer outputs");
}

torch::Tensor canonical_part(const CanonicalParam& param, const torch::Tensor& tensor) {
  if (param.rows.count == 0) return tensor;
  return tensor.narrow(0, param.rows.first, param.rows.count);
}

void CaseModelImpl::add_canonical_param(std::string name, torch::Tensor tensor,
                                        ParamLayout layout, TensorRows rows, int64_t heads) {
  canonical_params_.push_back({std::move(name), std::move(tensor), layout, rows, heads});
}

void CaseModelImpl::check_canonical_params() const {
  const std::vector<torch::Tensor> params = parameters();
  std::vector<int64_t> rows_taken;  // one per torch tensor met so far, in parameters()' order
  for (const CanonicalParam& param : canonical_params_) {
    size_t index = 0;
    while (index < rows_taken.size() && !params[index].is_same(param.tensor)) ++index;
    if (index == rows_taken.size()) {  // the tensor's first part: the next of parameters()
      PARITY_CHECK(index < params.size() && params[index].is_same(param.tensor));
      rows_taken.push_back(0);
    }
    PARITY_CHECK(param.rows.first == rows_taken[index]);
    rows_taken[index] += param.rows.count == 0 ? param.tensor.size(0) : param.rows.count;
  }
  PARITY_CHECK(rows_taken.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) PARITY_CHECK(rows_taken[i] == params[i].size(0));
}

std::shared_ptr<CaseModelImpl> make_case_model(const ModelSpec& spec, torch::ScalarType compute) {
  if (spec.layers.empty()) return std::make_shared<MlpImpl>(spec, compute);
  return std::make_shared<LayerModelImpl>(spec);
}

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

void load_canonical_params(CaseModelImpl& model, const NamedTensors& tensors,
                           const std::string& origin) {
  torch::NoGradGuard no_grad;
  const std::vector<CanonicalParam>& params = model.canonical_params();
  for (const CanonicalParam& param : params) {
    auto found = tensors.find(param.name);
    if (found == tensors.end()) {
      throw InputError(
          fmt::format("{}: no tensor '{}', which the case's model needs; make the file with "
                      "`parity init CASE --out FILE` for this case",
                      origin, param.name));
    }
    const HostTensor& tensor = found->second;
    // sizes() views the tensor's own storage: keep the canonical-layout tensor alive while
    // reading it (a temporary's sizes() dangled here, a heap use-after-free under ASan).
    const torch::Tensor part = canonical_part(param, param.tensor);
    const torch::Tensor canonical = to_canonical_layout(param, part);
    Shape expected_shape(canonical.sizes().begin(), canonical.sizes().end());
    if (tensor.dtype != DType::F32 || tensor.shape != expected_shape) {
      throw InputError(fmt::format(
          "{}: tensor '{}' is {} {} but the case's model needs F32 {}; the file was made for "
          "another model (check {})",
          origin, param.name, dtype_name(tensor.dtype), shape_to_string(tensor.shape),
          shape_to_string(expected_shape), model_fields(model)));
    }
    part.copy_(from_canonical_layout(param, to_torch(tensor)));
  }
  if (tensors.size() == params.size()) return;
  for (const auto& [name, tensor] : tensors) {
    const bool known = std::any_of(params.begin(), params.end(),
                                   [&](const CanonicalParam& param) { return param.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const CanonicalParam& param : params) names.push_back(param.name);
      throw InputError(fmt::format(
          "{}: tensor '{}' is not a parameter of the case's model (it has {}); the file was "
          "made for another model",
          origin, name, fmt::join(names, ", ")));
    }
  }
}

NamedTensors export_canonical_params(const CaseModelImpl& model) {
  return export_canonical(model, false);
}

NamedTensors export_canonical_grads(const CaseModelImpl& model) {
  return export_canonical(model, true);
}

}  // namespace parity::ddp_ref
