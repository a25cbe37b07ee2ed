#include "parity/common/init_params.h"

#include <limits>
#include <string>

#include "parity/common/error.h"
#include "pmap_engine/random.h"

namespace parity {
namespace {

void check_widths(const std::vector<int64_t>& widths) {
  if (widths.size() < 2) {
    throw InputError("init_mlp_params: model.widths has " + std::to_string(widths.size()) +
                     " entries; it needs at least two (input and output width, e.g. "
                     "[784, 256, 10])");
  }
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] <= 0) {
      throw InputError("init_mlp_params: model.widths[" + std::to_string(i) + "] is " +
                       std::to_string(widths[i]) + "; every width must be a positive integer");
    }
  }
}

}  // namespace

NamedTensors init_mlp_params(const std::vector<int64_t>& widths, uint64_t seed, double scale) {
  return init_mlp_params(widths, seed, scale, pmap_engine::random::default_partitionable());
}

NamedTensors init_mlp_params(const std::vector<int64_t>& widths, uint64_t seed, double scale,
                             bool partitionable) {
  namespace pr = pmap_engine::random;
  check_widths(widths);
  if (seed > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw InputError("init_mlp_params: init.seed " + std::to_string(seed) +
                     " is 2^63 or more; JAX's PRNGKey takes the seed as an int64 and raises "
                     "OverflowError; use a seed below 2^63");
  }
  // jax.random.PRNGKey(seed) for a Python int with jax_enable_x64 off (JAX's default).
  return init_mlp_params_from_key(
      widths, pr::prng_key(static_cast<int64_t>(seed), /*enable_x64=*/false), scale,
      partitionable);
}

NamedTensors init_mlp_params_from_key(const std::vector<int64_t>& widths,
                                      const pmap_engine::random::Key& key, double scale) {
  return init_mlp_params_from_key(widths, key, scale,
                                  pmap_engine::random::default_partitionable());
}

NamedTensors init_mlp_params_from_key(const std::vector<int64_t>& widths,
                                      const pmap_engine::random::Key& key, double scale,
                                      bool partitionable) {
  namespace pr = pmap_engine::random;
  check_widths(widths);
  const size_t num_layers = widths.size() - 1;
  const std::vector<pr::Key> layer_keys =
      pr::split(key, static_cast<int64_t>(num_layers), partitionable);
  const auto scale_f32 = static_cast<float>(scale);  // the weak-typed Python float, as float32

  NamedTensors params;
  for (size_t layer = 0; layer < num_layers; ++layer) {
    const int64_t fan_in = widths[layer];
    const int64_t fan_out = widths[layer + 1];
    std::vector<float> kernel = pr::normal(layer_keys[layer], {fan_in, fan_out}, partitionable);
    for (float& value : kernel) value = value * scale_f32;
    const std::string prefix = "dense" + std::to_string(layer);
    params.emplace(prefix + ".kernel", HostTensor::from_f32({fan_in, fan_out}, kernel));
    params.emplace(prefix + ".bias", HostTensor::zeros(DType::F32, {fan_out}));
  }
  return params;
}

}  // namespace parity
