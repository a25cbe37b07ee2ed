#include "tensor_scan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "figures.h"
#include "parity/common/error.h"
#include "parity/compare/tensor_diff.h"
#include "parity/compare/tolerance.h"

namespace parity::compare {
namespace {

constexpr const char* kGradsPrefix = "grads/";
constexpr const char* kParamsPrefix = "params/";
constexpr const char* kBatchStatsPrefix = "batch_stats/";
constexpr const char* kDigestsName = "replicas/param_digests";

struct Sums {
  double aa = 0, bb = 0, ab = 0, dd = 0;  // a.a, b.b, a.b, (a-b).(a-b)
};

// How far |a - b| lies beyond its allowance (negative inside it). Differences that are not a
// finite number (a NaN, an infinity on one side) count as infinitely far unless is_close accepts
// them (equal infinities), so the worst element reported is the non-finite one.
double excess_over_allowance(double a, double b, double rtol, double atol) {
  const double difference = std::abs(a - b);
  const double allowed = allowed_difference(b, rtol, atol);
  if (std::isfinite(difference) && std::isfinite(allowed)) return difference - allowed;
  const double kInf = std::numeric_limits<double>::infinity();
  return is_close(a, b, rtol, atol) ? -kInf : kInf;
}

// Element-wise comparison of a and b (equal lengths); `sums` receives the dot products.
TensorComparison compare_values(const std::vector<double>& a, const std::vector<double>& b,
                                double rtol, double atol, Sums& sums) {
  TensorComparison result;
  result.num_elements = a.size();
  double worst_excess = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < a.size(); ++i) {
    const double difference = a[i] - b[i];
    sums.aa += a[i] * a[i];
    sums.bb += b[i] * b[i];
    sums.ab += a[i] * b[i];
    sums.dd += difference * difference;
    result.non_finite |= !std::isfinite(a[i]) || !std::isfinite(b[i]);
    if (!is_close(a[i], b[i], rtol, atol)) ++result.num_out_of_tolerance;
    const double excess = excess_over_allowance(a[i], b[i], rtol, atol);
    if (i == 0 || excess > worst_excess) {
      worst_excess = excess;
      result.worst_index = i;
    }
    result.delta.max_abs = std::max(result.delta.max_abs, std::abs(difference));
  }
  if (!a.empty()) {
    result.worst_a = a[result.worst_index];
    result.worst_b = b[result.worst_index];
  }
  const double norm_a = std::sqrt(sums.aa);
  const double norm_b = std::sqrt(sums.bb);
  const double norm_d = std::sqrt(sums.dd);
  result.norm_b = norm_b;
  // Zero references: equal zeros are a perfect match; anything against zero is infinitely off.
  const double kInf = std::numeric_limits<double>::infinity();
  result.delta.rel_l2 = norm_b > 0 ? norm_d / norm_b : (norm_d > 0 ? kInf : 0);
  result.delta.norm_ratio = ratio_of(norm_a, norm_b);
  result.delta.cosine =
      norm_a > 0 && norm_b > 0 ? sums.ab / (norm_a * norm_b) : (norm_a == norm_b ? 1 : 0);
  // std::max drops NaN differences; a tensor holding one has no honest largest difference.
  if (result.non_finite) result.delta.max_abs = std::numeric_limits<double>::quiet_NaN();
  result.delta.within_tolerance = result.num_out_of_tolerance == 0;
  return result;
}

bool has_prefix(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }

// Compares the tensors under `prefix` at one step; adds their squared norms to `norms` when given.
void compare_group(int64_t step, const NamedTensors& a, const NamedTensors& b, const char* prefix,
                   const std::string& file_a, const std::string& file_b, double rtol, double atol,
                   TensorGroup& group, Sums* norms) {
  for (const auto& [key, tensor_a] : a) {
    if (!has_prefix(key, prefix)) continue;
    const std::string name = key.substr(std::strlen(prefix));
    const auto found = b.find(key);
    if (found == b.end()) {
      group.mismatched.push_back({step, name, "recorded by run A only"});
      continue;
    }
    const HostTensor& tensor_b = found->second;
    if (tensor_a.shape != tensor_b.shape) {
      group.mismatched.push_back({step, name,
                                  "shapes differ: A " + shape_to_string(tensor_a.shape) + ", B " +
                                      shape_to_string(tensor_b.shape)});
      continue;
    }
    const std::vector<double> values_a = recorded_values(tensor_a, key, file_a);
    const std::vector<double> values_b = recorded_values(tensor_b, key, file_b);
    Sums sums;
    TensorComparison comparison = compare_values(values_a, values_b, rtol, atol, sums);
    comparison.delta.step = step;
    comparison.delta.name = name;
    comparison.shape = tensor_a.shape;
    if (norms != nullptr) {
      norms->aa += sums.aa;
      norms->bb += sums.bb;
    }
    group.compared.push_back(std::move(comparison));
  }
  for (const auto& [key, tensor_b] : b) {
    if (has_prefix(key, prefix) && a.find(key) == a.end()) {
      group.mismatched.push_back({step, key.substr(std::strlen(prefix)), "recorded by run B only"});
    }
  }
}

std::optional<std::vector<uint64_t>> read_digests(const NamedTensors& tensors,
                                                  const std::string& file) {
  const auto found = tensors.find(kDigestsName);
  if (found == tensors.end()) return std::nullopt;
  const HostTensor& tensor = found->second;
  if (tensor.dtype != DType::I64 || tensor.shape.size() != 1) {
    throw InputError(
        fmt::format("{}: tensor \"{}\" is {} {}; expected I64 [replicas], one "
                    "FNV-1a 64 digest of each replica's parameters",
                    file, kDigestsName, dtype_name(tensor.dtype), shape_to_string(tensor.shape)));
  }
  // Producers store each uint64 digest bit for bit in an int64 slot.
  std::vector<uint64_t> digests(tensor.num_elements());
  std::memcpy(digests.data(), tensor.bytes.data(), tensor.num_bytes());
  return digests;
}

std::optional<NamedTensors> read_if_recorded(const RunDir& run, int64_t step) {
  if (!std::binary_search(run.tensor_steps.begin(), run.tensor_steps.end(), step)) {
    return std::nullopt;
  }
  return read_step_tensors(run.dir, step);
}

}  // namespace

std::string tensor_file(const RunDir& run, int64_t step) {
  return (run.dir / "tensors" / fmt::format("step_{:06d}.safetensors", step)).string();
}

std::vector<double> recorded_values(const HostTensor& tensor, const std::string& name,
                                    const std::string& file) {
  const size_t count = tensor.num_elements();
  switch (tensor.dtype) {
    case DType::F32: {
      const float* values = tensor.data_as<float>();
      return std::vector<double>(values, values + count);
    }
    case DType::F64: {
      const double* values = tensor.data_as<double>();
      return std::vector<double>(values, values + count);
    }
    default:
      // Producers record gradients, parameters and layer outputs in their master dtype (f32, or
      // f64 for an oracle run); anything else is not a run this build can compare.
      throw InputError(
          fmt::format("{}: tensor \"{}\" is {}; gradients, parameters and layer outputs must "
                      "be recorded as F32 or F64 to be compared",
                      file, name, dtype_name(tensor.dtype)));
  }
}

TensorComparison compare_values(const std::vector<double>& a, const std::vector<double>& b,
                                double rtol, double atol) {
  Sums sums;
  return compare_values(a, b, rtol, atol, sums);
}

TensorScan scan_tensors(const RunDir& a, const RunDir& b, double rtol, double atol) {
  TensorScan scan;
  scan.steps_a = a.tensor_steps;
  scan.steps_b = b.tensor_steps;
  std::vector<int64_t> all_steps;
  std::set_union(a.tensor_steps.begin(), a.tensor_steps.end(), b.tensor_steps.begin(),
                 b.tensor_steps.end(), std::back_inserter(all_steps));
  for (int64_t step : all_steps) {
    const std::optional<NamedTensors> tensors_a = read_if_recorded(a, step);
    const std::optional<NamedTensors> tensors_b = read_if_recorded(b, step);
    const std::string file_a = tensor_file(a, step);
    const std::string file_b = tensor_file(b, step);
    if (tensors_a) {
      if (auto digests = read_digests(*tensors_a, file_a)) scan.digests_a[step] = *digests;
    }
    if (tensors_b) {
      if (auto digests = read_digests(*tensors_b, file_b)) scan.digests_b[step] = *digests;
    }
    if (!tensors_a || !tensors_b) continue;

    scan.common_steps.push_back(step);
    Sums grad_norms;
    compare_group(step, *tensors_a, *tensors_b, kGradsPrefix, file_a, file_b, rtol, atol,
                  scan.grads, &grad_norms);
    compare_group(step, *tensors_a, *tensors_b, kParamsPrefix, file_a, file_b, rtol, atol,
                  scan.params, nullptr);
    compare_group(step, *tensors_a, *tensors_b, kBatchStatsPrefix, file_a, file_b, rtol, atol,
                  scan.batch_stats, nullptr);
    if (grad_norms.bb > 0) {
      scan.grad_global_norm_ratio[step] = std::sqrt(grad_norms.aa) / std::sqrt(grad_norms.bb);
    }
  }
  return scan;
}

std::vector<TensorDelta> diff_tensor_sets(const NamedTensors& a, const NamedTensors& b,
                                          const std::string& label_a, const std::string& label_b,
                                          double rtol, double atol) {
  TensorGroup group;
  compare_group(0, a, b, "", label_a, label_b, rtol, atol, group, nullptr);
  std::vector<TensorDelta> deltas;
  for (const TensorComparison& comparison : group.compared) deltas.push_back(comparison.delta);
  return deltas;
}

}  // namespace parity::compare
