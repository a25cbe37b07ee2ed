// shard_map: maps a function over the devices of a Mesh, as jax.shard_map
// (jax/_src/shard_map.py). Every argument is a global array; the function sees each device's
// block of it (PartitionSpec in_specs), collectives over the mesh's axis names combine the
// blocks, and the outputs' blocks are assembled into global arrays (out_specs).
//
// pmap is this transformation on a one-axis mesh (JAX's default since jax-v0.8.0, where the
// code is in jax/_src/shard_map.py, in jax/_src/pmap.py from jax-v0.8.1: Mesh(devices,
// (axis_name,)), in_specs from in_axes, check_vma=False); pmap.cpp builds on the same mapped
// call (runtime/mapped_call.h).
//
// Replication and autodiff (check_vma, JAX's default True): every traced value carries the mesh
// axes it varies along, JAX's varying-manual-axes type (ir/varying_axes.h): an input varies
// along the axes its in_spec names, axis_index, ppermute, psum_scatter and all_gather keep or
// add the axis, psum/pmax/pmin remove it. An output that varies along an axis its out_spec
// omits raises JAX's error. An invariant value meeting a varying one is pvary'd (a no-op cast),
// and psum binds psum_invariant; under grad, psum_invariant transposes to pvary and pvary to
// psum_invariant (jax/_src/lax/parallel.py), so a psum'd loss's gradient is the local one and a
// replicated argument's gradient is summed over the devices. With check_vma=False (pmap's
// semantics) values are untyped and psum transposes to psum.
#pragma once

#include <set>
#include <vector>

#include "pmap_engine/mesh.h"
#include "pmap_engine/mapped.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {

struct ShardMapOptions {
  // One spec per positional argument, applied to every leaf of it (a tree prefix, as JAX
  // broadcasts a spec over a pytree argument).
  std::vector<PartitionSpec> in_specs;
  // One spec per top-level output (tuple entry), or one for all outputs.
  std::vector<PartitionSpec> out_specs;
  bool check_vma = true;
  std::set<size_t> donate_argnums;
};

class ShardMapped : public Mapped {
 public:
  ShardMapped(TreeFunction function, Mesh mesh, ShardMapOptions options);
};

ShardMapped shard_map(TreeFunction function, Mesh mesh, ShardMapOptions options);

}  // namespace pmap_engine
