#include "gradient_signal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "figures.h"
#include "tensor_scan.h"

namespace parity::compare {
namespace {

constexpr const char* kGradsPrefix = "grads/";

// Each recorded gradient's L2 norm at one step, by parameter name.
std::map<std::string, double> gradient_norms(const RunDir& oracle, int64_t step) {
  std::map<std::string, double> norms;
  const std::string file = tensor_file(oracle, step);
  for (const auto& [key, tensor] : read_step_tensors(oracle.dir, step)) {
    if (key.rfind(kGradsPrefix, 0) != 0) continue;
    double sum = 0;
    for (const double value : recorded_values(tensor, key, file)) sum += value * value;
    norms[key.substr(std::strlen(kGradsPrefix))] = std::sqrt(sum);
  }
  return norms;
}

}  // namespace

GradientSignal find_gradient_signal(const RunDir& oracle) {
  GradientSignal signal;
  const double resolution = std::ldexp(1.0, -24);
  std::map<std::string, double> largest_ratio;  // over the steps read so far
  for (const int64_t step : oracle.tensor_steps) {
    const std::map<std::string, double> norms = gradient_norms(oracle, step);
    if (norms.empty()) continue;
    ++signal.steps;
    double largest = 0;
    for (const auto& [name, norm] : norms) largest = std::max(largest, norm);
    for (const auto& [name, norm] : norms) {
      const double ratio = largest > 0 ? norm / largest : 1;
      double& kept = largest_ratio.try_emplace(name, 0).first->second;
      kept = std::isnan(ratio) ? 1 : std::max(kept, ratio);  // a NaN is not a zero
    }
  }
  for (const auto& [name, ratio] : largest_ratio) {
    if (ratio < resolution) signal.without_signal[name] = ratio;
  }
  return signal;
}

std::string GradientSignal::describe() const {
  if (without_signal.empty()) return "";
  std::vector<std::string> names;
  double worst = 0;
  for (const auto& [name, ratio] : without_signal) {
    names.push_back(name);
    worst = std::max(worst, ratio);
  }
  return fmt::format(
      "no gradient signal, not judged: {} (the oracle's gradient at most {} of the step's "
      "largest at each of {} recorded steps, below f32's resolution 2^-24: zero in exact "
      "arithmetic, so each f32 run's gradient is rounding noise and its updates follow the "
      "noise)",
      fmt::join(names, ", "), format_number(worst), steps);
}

}  // namespace parity::compare
