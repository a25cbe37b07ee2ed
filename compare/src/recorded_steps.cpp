#include "recorded_steps.h"

#include <algorithm>
#include <cmath>

#include "tensor_scan.h"

namespace parity::compare {

StepValues read_values(const RunDir& run, int64_t step) {
  const std::string file = step_tensors_path(run.dir, step).string();
  StepValues values;
  for (const auto& [name, tensor] : read_step_tensors(run.dir, step)) {
    if (tensor.dtype == DType::F32 || tensor.dtype == DType::F64) {
      values.emplace(name, Recorded{tensor.shape, recorded_values(tensor, name, file)});
    }
  }
  return values;
}

bool recorded(const RunDir& run, int64_t step) {
  return std::find(run.tensor_steps.begin(), run.tensor_steps.end(), step) !=
         run.tensor_steps.end();
}

std::optional<int64_t> first_step_recorded(const RunPair& runs) {
  if (runs.common.empty()) return std::nullopt;
  const int64_t first = runs.common.front().step();
  if (!recorded(runs.a, first) || !recorded(runs.b, first)) return std::nullopt;
  return first;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

double root_mean_square(const std::vector<double>& values) {
  double sum = 0;
  for (const double value : values) sum += value * value;
  return values.empty() ? 0 : std::sqrt(sum / static_cast<double>(values.size()));
}

}  // namespace parity::compare
