#include "parity/common/init_params.h"

#include <limits>
#include <string>

#include "flax_init.h"
#include "parity/common/error.h"
#include "parity/common/model_layers.h"
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

// jax.random.PRNGKey(seed) for a Python int with jax_enable_x64 off (JAX's default).
pmap_engine::random::Key prng_key_of_seed(uint64_t seed, const char* what) {
  if (seed > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw InputError(std::string(what) + ": init.seed " + std::to_string(seed) +
                     " is 2^63 or more; JAX's PRNGKey takes the seed as an int64 and raises "
                     "OverflowError; use a seed below 2^63");
  }
  return pmap_engine::random::prng_key(static_cast<int64_t>(seed), /*enable_x64=*/false);
}

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A layers model under "jax-normal": seed 002's scheme carried over to every kernel.
NamedTensors init_layer_params_jax_normal(const ModelSpec& model, const InitSpec& init) {
  namespace pr = pmap_engine::random;
  const bool partitionable = pr::default_partitionable();
  const ModelShapes shapes = infer_model_shapes(model.layers, model.input);
  int64_t num_kernels = 0;
  for (const ModelTensor& param : shapes.params) num_kernels += ends_with(param.name, "/kernel");
  const std::vector<pr::Key> keys =
      pr::split(prng_key_of_seed(init.seed, "init_model_params"), num_kernels, partitionable);
  const auto scale_f32 = static_cast<float>(init.scale);
  NamedTensors params;
  size_t kernel = 0;
  for (const ModelTensor& param : shapes.params) {
    const Shape shape(param.shape.begin(), param.shape.end());
    if (ends_with(param.name, "/kernel")) {
      std::vector<float> values = pr::normal(keys[kernel++], shape, partitionable);
      for (float& value : values) value = value * scale_f32;
      params.emplace(param.name, HostTensor::from_f32(shape, values));
    } else if (ends_with(param.name, "/scale")) {
      params.emplace(param.name, HostTensor::from_f32(
                                     shape, std::vector<float>(shape_num_elements(shape), 1.0f)));
    } else {
      params.emplace(param.name, HostTensor::zeros(DType::F32, shape));
    }
  }
  return params;
}

}  // namespace

NamedTensors init_model_params(const CaseSpec& spec) {
  if (spec.init.scheme == "torch") {
    // LibTorch's constructors draw these values; common/ does not link LibTorch.
    throw InputError(
        "case " + spec.name +
        ": init.scheme = \"torch\" is LibTorch's own initialisation, which ddp_ref makes, not "
        "common's init_model_params; write the init file with `parity init " + spec.name +
        " --set init.scheme=torch --out FILE` (parity run, ddp and pmap make it themselves), or "
        "use init.scheme jax-normal or flax here");
  }
  if (spec.model.layers.empty()) {
    return init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale);
  }
  if (spec.init.scheme == "jax-normal") return init_layer_params_jax_normal(spec.model, spec.init);
  if (spec.init.scheme == "flax") {
    return init_layer_params_flax(spec.model, prng_key_of_seed(spec.init.seed, "init_model_params"));
  }
  throw InternalError("init.scheme '" + spec.init.scheme + "' passed case validation");
}

NamedTensors init_mlp_params(const std::vector<int64_t>& widths, uint64_t seed, double scale) {
  return init_mlp_params(widths, seed, scale, pmap_engine::random::default_partitionable());
}

NamedTensors init_mlp_params(const std::vector<int64_t>& widths, uint64_t seed, double scale,
                             bool partitionable) {
  check_widths(widths);
  return init_mlp_params_from_key(widths, prng_key_of_seed(seed, "init_mlp_params"), scale,
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
