#include "rounding_growth.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "checks.h"
#include "parity/common/layer_intermediates.h"

namespace parity::compare {
namespace {

constexpr double kUnitRoundoff = 0x1p-24;  // f32

// sqrt of the most values one BatchNorm channel's statistics sum on one replica.
double statistics_growth(const CaseSpec& spec) {
  int64_t most = 1;
  for (const LayerIntermediate& layer : layer_intermediates(spec.model)) {
    if (layer.kind != "batch_norm" || layer.shape.empty()) continue;
    int64_t values = spec.data.per_replica_batch;
    for (size_t axis = 0; axis + 1 < layer.shape.size(); ++axis) values *= layer.shape[axis];
    most = std::max(most, values);
  }
  return std::sqrt(static_cast<double>(most));
}

// The largest relative error, over steps 1..steps, of 1 - decay^t as optax computes it in f32
// (pmap_engine/src/optim/optim.cpp power_of_count: the base rounded to f32, the power in f64,
// rounded to f32, the subtraction in f32), in units of f32's unit roundoff.
double correction_error_in_roundings(double decay, int64_t steps) {
  const double base = static_cast<double>(static_cast<float>(decay));
  double worst = 0;
  for (int64_t t = 1; t <= steps; ++t) {
    const auto power = static_cast<float>(std::exp(static_cast<double>(t) * std::log(base)));
    const float correction = 1.0f - power;
    const double exact = 1.0 - std::pow(decay, static_cast<double>(t));
    if (exact <= 0) break;
    worst = std::max(worst, std::abs(static_cast<double>(correction) - exact) / exact);
  }
  return worst / kUnitRoundoff;
}

double optimizer_growth(const TrainSpec& train) {
  if (train.optimizer != "adam" && train.optimizer != "adamw") return 1;
  // The update is m_hat / sqrt(v_hat): b1's correction scales it as it is, b2's by its root.
  return std::max({1.0, correction_error_in_roundings(train.beta1, train.steps),
                   correction_error_in_roundings(train.beta2, train.steps) / 2});
}

RoundingGrowth growth_of(const RunDir& run) {
  const std::optional<CaseSpec> spec = recorded_case(run);
  if (!spec) return {};
  return {statistics_growth(*spec), optimizer_growth(spec->train)};
}

}  // namespace

RoundingGrowth rounding_growth(const RunDir& a, const RunDir& b) {
  const RoundingGrowth from_a = growth_of(a);
  const RoundingGrowth from_b = growth_of(b);
  return {std::max(from_a.statistics, from_b.statistics),
          std::max(from_a.optimizer, from_b.optimizer)};
}

}  // namespace parity::compare
