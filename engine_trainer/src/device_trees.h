// Trees with a leading device axis, as pmap takes and returns them.
#pragma once

#include <vector>

#include "pmap_engine/tree.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// The trees (one per device, same structure) stacked leaf by leaf on a new leading device axis.
pe::Tree stack(const std::vector<pe::Tree>& per_device);

// Device d's value of a tree with a leading device axis (params[d] in JAX).
pe::Tree device_slice(const pe::Tree& tree, int64_t d);

// [N, B, ...] -> [N * B, ...] for every leaf: device d's batch becomes block d of the global
// batch, as a jit or shard_map user's global batch holds it.
pe::Tree merge_device_axis(const pe::Tree& stacked);

// The L2 norm of all leaves together (optax.global_norm), computed in double on the host.
double global_l2_norm(const pe::Tree& tree);

}  // namespace parity::engine_trainer
