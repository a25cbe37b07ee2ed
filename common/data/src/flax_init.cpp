#include "flax_init.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "parity/common/error.h"
#include "parity/common/flax_rng.h"
#include "parity/common/init_params.h"
#include "parity/common/model_layers.h"

namespace parity {
namespace {

namespace pr = pmap_engine::random;

// A kernel's fan-in as lecun_normal sees it (jax/_src/nn/initializers.py, _compute_fans with
// in_axis=-2, out_axis=-1). Dense (in, out) and conv (H, W, in, out) kernels: every axis but the
// last (the receptive field times the inputs). Attention projections are DenseGeneral kernels,
// which flax/linen/linear.py (DenseGeneral, kernel_init_wrap) initialises flattened to
// (contracted, features): query, key and value (E, H, E/H) as (E, H * E/H), so E; out
// (H, E/H, E) as (H * E/H, E), every axis but the last again.
double fan_in(const std::string& module, const Shape& shape) {
  if (module == "query" || module == "key" || module == "value") {
    return static_cast<double>(shape.front());
  }
  double product = 1;
  for (size_t axis = 0; axis + 1 < shape.size(); ++axis) product *= static_cast<double>(shape[axis]);
  return product;
}

// jax.nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal"): the variance is the
// Python float 1 / fan_in cast to float32; sqrt and the division by the truncated normal's
// standard deviation run in float32. The values are drawn for the kernel's own shape (the same
// row-major stream as its flattened shape).
std::vector<float> lecun_normal(pr::Key key, const Shape& shape, double fan_in) {
  const auto variance = static_cast<float>(1.0 / fan_in);
  const float stddev = std::sqrt(variance) / static_cast<float>(.87962566103423978);
  std::vector<float> values =
      pr::truncated_normal(key, -2.0f, 2.0f, shape, pr::default_partitionable());
  for (float& value : values) value = value * stddev;
  return values;
}

}  // namespace

pr::Key flax_param_key(pr::Key root, const std::vector<std::string>& module_path,
                       uint32_t counter) {
  return pr::fold_in(root, flax_make_rng_data(module_path, counter));
}

NamedTensors init_layer_params_flax(const ModelSpec& model, pr::Key root) {
  const ModelShapes shapes = infer_model_shapes(model.layers, model.input);
  // infer_model_shapes lists each module's parameters in the order its Flax module creates them
  // (kernel then bias; scale then bias), so a parameter's make_rng count is its place there.
  std::map<std::vector<std::string>, uint32_t> calls_per_module;
  NamedTensors params;
  for (const ModelTensor& param : shapes.params) {
    std::vector<std::string> path = split_module_path(param.name);
    const std::string leaf = path.back();
    path.pop_back();
    const uint32_t counter = ++calls_per_module[path];
    const Shape shape(param.shape.begin(), param.shape.end());
    const pr::Key key = flax_param_key(root, path, counter);
    if (leaf == "kernel") {
      params.emplace(param.name, HostTensor::from_f32(
                                     shape, lecun_normal(key, shape, fan_in(path.back(), shape))));
    } else if (leaf == "pos_embedding") {
      // google-research/vision_transformer (vit_jax/models_vit.py, Encoder: AddPositionEmbs with
      // posemb_init=nn.initializers.normal(stddev=0.02)): normal(key) * float32(0.02).
      std::vector<float> values = pr::normal(key, shape, pr::default_partitionable());
      for (float& value : values) value = value * 0.02f;
      params.emplace(param.name, HostTensor::from_f32(shape, values));
    } else if (leaf == "scale") {
      params.emplace(param.name, HostTensor::from_f32(
                                     shape, std::vector<float>(shape_num_elements(shape), 1.0f)));
    } else if (leaf == "bias" || leaf == "cls") {  // cls: nn.initializers.zeros (VisionTransformer)
      params.emplace(param.name, HostTensor::zeros(DType::F32, shape));
    } else {
      throw InternalError("no Flax initialiser for parameter '" + param.name + "'");
    }
  }
  return params;
}

}  // namespace parity
