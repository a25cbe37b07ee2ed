// Initial parameters, made once per case and read by both engines (docs/design.md, "Data
// flow"). The scheme is JAX's, as a Flax user's init would compute it:
//
//   key  = jax.random.PRNGKey(seed)               # jax_enable_x64 off: [0, seed mod 2^32]
//   keys = jax.random.split(key, num_layers)
//   dense{i}.kernel = jax.random.normal(keys[i], (widths[i], widths[i+1]), float32) * scale
//   dense{i}.bias   = jnp.zeros((widths[i+1],), float32)
//
// Kernels are laid out as Flax's Dense stores them: (in, out), row-major. The multiply by
// `scale` happens in float32, as JAX multiplies a float32 array by a (weak-typed) Python float:
// value * float32(scale). The random streams come from pmap_engine::random, bit-exact with JAX.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "pmap_engine/random.h"

namespace parity {

// widths: layer widths including input and output ({784, 256, 10}: two layers). Throws
// InputError when there are fewer than two widths, a width is not positive, or the seed is
// 2^63 or more (JAX's PRNGKey takes the seed as an int64 and raises OverflowError there).
// Uses JAX's current default for jax_threefry_partitionable
// (pmap_engine::random::default_partitionable()).
NamedTensors init_mlp_params(const std::vector<int64_t>& widths, uint64_t seed, double scale);

// The same with jax_threefry_partitionable set explicitly, for reproducing runs of JAX versions
// before 0.5.0 (false) or after (true).
NamedTensors init_mlp_params(const std::vector<int64_t>& widths, uint64_t seed, double scale,
                             bool partitionable);

// The same scheme from a key instead of PRNGKey(seed): what a user who initialises inside the
// mapped function computes on each device from fold_in(key, axis_index) (pitfall P4).
NamedTensors init_mlp_params_from_key(const std::vector<int64_t>& widths,
                                      const pmap_engine::random::Key& key, double scale);
NamedTensors init_mlp_params_from_key(const std::vector<int64_t>& widths,
                                      const pmap_engine::random::Key& key, double scale,
                                      bool partitionable);

// The case's initial parameters under canonical names, whichever form its model takes: a widths
// model as init_mlp_params; a layers model (docs/model-layers.md) by init.scheme over the
// parameters infer_model_shapes names. "jax-normal" gives kernel i (the model's kernels in
// order) jax.random.normal(split(PRNGKey(seed), K)[i], shape) * scale, biases and norm biases
// zero, norm scales one; "flax" is flax.linen's own initialisation (common/data/src/flax_init.h).
// BatchNorm statistics are not in the file: both frameworks start them at mean 0, variance 1.
// "torch" (LibTorch's constructors) is ddp_ref's (ddp_ref::torch_init_params): InputError here.
// The CLI's make_init_params (cli/case_init.h) dispatches between the two.
NamedTensors init_model_params(const CaseSpec& spec);

// The key the `counter`-th self.param call (1-based) of the module at `module_path` ({"Residual_0",
// "Conv_0"}) receives from the root key (flax/core/scope.py, Scope.push and Scope.make_rng: each
// scope appends its name to a LazyRng suffix, make_rng appends the scope's call count, and
// _fold_in_static folds SHA-1(suffix)'s first 4 bytes, big-endian, into the root key;
// flax_fix_rng_separator is off by default, so no separators are hashed).
pmap_engine::random::Key flax_param_key(pmap_engine::random::Key root,
                                        const std::vector<std::string>& module_path,
                                        uint32_t counter);

}  // namespace parity
