// flax.linen's default initialisation of a layers model (init.scheme = "flax"), as
// `model.init(jax.random.PRNGKey(seed), x)` computes it for the modules docs/model-layers.md
// names: every parameter from its own key, derived from the root key and the parameter's place
// in the module tree.
#pragma once

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "pmap_engine/random.h"

namespace parity {

// Kernels lecun_normal (jax.nn.initializers.variance_scaling(1, "fan_in", "truncated_normal")),
// biases zeros, norm scales ones (flax/linen/linear.py default_kernel_init, bias_init;
// flax/linen/normalization.py scale_init, bias_init).
NamedTensors init_layer_params_flax(const ModelSpec& model, pmap_engine::random::Key root);

}  // namespace parity
