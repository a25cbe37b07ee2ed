// shard_map: maps a function over the devices of a Mesh, as jax.shard_map
// (jax/_src/shard_map.py). Every argument is a global array; the function sees each device's
// block of it (PartitionSpec in_specs), collectives over the mesh's axis names combine the
// blocks, and the outputs' blocks are assembled into global arrays (out_specs).
//
// pmap is this transformation on a one-axis mesh (jax/_src/pmap.py, JAX >= 0.8: Mesh(devices,
// (axis_name,)), in_specs from in_axes, check_vma=False); pmap.cpp builds on the same mapped
// call (runtime/mapped_call.h).
//
// Replication (check_vma, JAX's default True): an out_spec that leaves a mesh axis out says the
// output is the same on every device along it. The engine proves that statically from the
// program, as JAX's varying-manual-axes inference does: a value varies along an axis when it
// derives from an input split over it, from axis_index, ppermute or psum_scatter over it;
// psum/pmax/pmin/all_gather over the axis make it invariant again. An output that varies along
// an axis its out_spec omits raises JAX's error.
//
// One difference from JAX, refused rather than modelled: with check_vma=True JAX transposes
// psum into pvary (no sum: the gradient of a psum'd loss is the local gradient) and pvary into
// psum. The engine's autodiff follows pmap's rules (psum transposes to psum), so differentiating
// through a collective under check_vma=True raises an error asking for check_vma=false, whose
// semantics pmap has and the engine models exactly.
#pragma once

#include <set>
#include <vector>

#include "pmap_engine/mesh.h"
#include "pmap_engine/pmap.h"
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

class ShardMapped {
 public:
  ShardMapped(TreeFunction function, Mesh mesh, ShardMapOptions options);
  ~ShardMapped();
  Tree operator()(const std::vector<Tree>& args) const;

  CacheStats cache_stats() const;
  MappedExecutionStats last_execution() const;
  // The per-device program traced for these arguments.
  std::string program_text(const std::vector<Tree>& args) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

ShardMapped shard_map(TreeFunction function, Mesh mesh, ShardMapOptions options);

}  // namespace pmap_engine
