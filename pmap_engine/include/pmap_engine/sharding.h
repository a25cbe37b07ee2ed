// NamedSharding, as jax.sharding.NamedSharding: a Mesh and a PartitionSpec that say where the
// blocks of a global array live. jit takes them as in_shardings (transforms.h), checks each
// argument against its sharding before tracing, as jax/_src/pjit.py does, and then computes
// what the unsharded function computes: a sharding is a placement, not a change of values.
//
// What the engine does not model is XLA's SPMD partitioner: the per-device programs, the
// collectives it inserts and their reduction order. A sharded jit here runs the global program.
#pragma once

#include <string>

#include "pmap_engine/array.h"
#include "pmap_engine/mesh.h"

namespace pmap_engine {

class NamedSharding {
 public:
  // Checks that every axis the spec names exists in the mesh (jax's check_pspec).
  NamedSharding(Mesh mesh, PartitionSpec spec);

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }

  // JAX's repr in the release in effect (jax_release.h): at 0.11.0 "NamedSharding(mesh=
  // Mesh('data': 8, axis_types=(Auto,)), spec=P('data',), memory_kind=device)".
  std::string to_string() const;

  // jax/_src/pjit.py pjit_check_aval_sharding for one leaf: the spec may not be longer than
  // the rank, and every split dimension must divide evenly by its split factor. Throws
  // EngineError in JAX's wording; `what` names the leaf ("pjit arguments with pytree key path
  // args[0].dense1.bias").
  void check_leaf(const Shape& shape, const std::string& what) const;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

}  // namespace pmap_engine
