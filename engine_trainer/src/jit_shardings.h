// The shardings a JAX user gives the jitted train step (parallel.style), on a one-axis mesh
// Mesh(devices, ('data',)):
//
//   jit-dp    params P(), opt_state P(); x, y P('data'); out: params, opt_state, loss, grads P()
//             (the "8-way batch data parallelism" of JAX's "Distributed arrays and automatic
//             parallelization", jax-v0.4.38 docs/notebooks/
//             Distributed_arrays_and_automatic_parallelization.md: the batch device_put with
//             P('batch'), the params with P(), then jax.jit(jax.grad(loss)))
//   jit-fsdp  every param leaf split over 'data' (ZeRO-3: each device holds 1/N of it), its
//             optimizer state alike, scalars P(); x, y P('data'); out: params, opt_state and
//             grads as their params, loss P()
//
// jit-fsdp's rule for one leaf of shape S on N devices (fsdp_sharding):
//   S[0] % N == 0                         P('data')              the leading dimension split
//   else the first d with S[d] % N == 0   P(None, ..., 'data')   dimension d split
//   else (or a scalar)                    P()                    replicated: an uneven leaf
// JAX's shard_map guide puts every parameter leaf on its leading dimension
// (jax-v0.11.0 docs/new_docs/201/shard-map.md, "8-way fully sharded data parallelism (FSDP)":
// params = jax.device_put(params, jax.P('batch'))), which needs every leading dimension to divide;
// big_vision's "fsdp" rule (google-research/big_vision big_vision/sharding.py, shardings.fsdp)
// falls back to another dimension that divides, and leaves a leaf it cannot split replicated.
// The rule depends on the shape alone, so Adam's mu and nu, shaped like their parameter, take
// their parameter's sharding, as `jax.tree.map(fsdp_sharding, opt_state)` gives them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/sharding.h"
#include "step_signature.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// One leaf's sharding under jit-fsdp (the rule above).
pe::NamedSharding fsdp_sharding(const pe::Mesh& mesh, const pe::Shape& shape);

// The jit's shardings for the step's arguments and results (step_signature.h), and each state
// leaf's, in flatten order.
struct TrainStepShardings {
  std::vector<pe::ShardingTree> in;
  std::vector<pe::ShardingTree> out;
  std::vector<pe::NamedSharding> params;     // per leaf of params
  std::vector<pe::NamedSharding> opt_state;  // per leaf of opt_state
};

// `style` is "jit-dp" or "jit-fsdp"; `params` and `opt_state` the global values (their shapes
// pick the shardings). A clipping step's (applied, reduced) gradients are both laid out as
// their parameters; a layers model's batch_stats are replicated.
TrainStepShardings train_step_shardings(const std::string& style, const pe::Mesh& mesh,
                                        const pe::Tree& params, const pe::Tree& opt_state,
                                        const StepSignature& signature);

// The bytes each device holds of params and opt_state under their shardings: each leaf's block
// (NamedSharding::shard_shape) times its dtype's size, and the layout in words, naming the
// parameter leaves left replicated because no dimension divides (`separator` joins a leaf's
// path into its canonical name).
DeviceStateBytes sharded_state_bytes(const std::string& style, const pe::Tree& params,
                                     const pe::Tree& opt_state,
                                     const TrainStepShardings& shardings,
                                     const std::string& separator);

}  // namespace parity::engine_trainer
