// NamedSharding, as jax.sharding.NamedSharding: a Mesh and a PartitionSpec that say where the
// blocks of a global array live. jit takes them as in_shardings and out_shardings
// (transforms.h), checks each argument against its sharding before tracing, as
// jax/_src/pjit.py does, then propagates shardings through the traced program and partitions
// it into one per-device program, as XLA's sharding propagation and SPMD partitioner do
// (runtime/sharding_propagation.h, runtime/spmd_partitioner.h). A sharding is a placement, not
// a change of values: the partitioned program computes what the global one computes, up to
// the order of the sums its collectives split.
#pragma once

#include <string>
#include <vector>

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
  // args[0].dense1.bias"). `allow_uneven` skips the divisibility check
  // (with_sharding_constraint's allow_uneven_sharding=True).
  void check_leaf(const Shape& shape, const std::string& what, bool allow_uneven = false) const;

  // Each device's block of a value of `global_shape` (jax's Sharding.shard_shape): every
  // dimension divided by the product of the mesh axes its spec entry names. check_leaf first.
  Shape shard_shape(const Shape& global_shape) const;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

// The shardings of one argument's or output's leaves: one NamedSharding for all of them (JAX
// broadcasts a sharding over a pytree prefix), or one per leaf in flatten order.
class ShardingTree {
 public:
  ShardingTree(NamedSharding all);  // NOLINT(google-explicit-constructor): as JAX's prefix
  explicit ShardingTree(std::vector<NamedSharding> per_leaf);

  // Leaf i's sharding of a value with `num_leaves` leaves; throws EngineError naming `what`
  // when a per-leaf tree has another number of leaves.
  const NamedSharding& leaf(size_t i, size_t num_leaves, const std::string& what) const;
  bool is_prefix() const { return per_leaf_.size() == 1 && broadcast_; }

 private:
  std::vector<NamedSharding> per_leaf_;
  bool broadcast_ = false;
};

// jax.lax.with_sharding_constraint(x, sharding): inside a sharded jit, x takes this sharding,
// which propagation then spreads forward and back; its cotangent takes it too (JAX's
// sharding_constraint transpose rule). Outside jit, or in a jit without shardings, x itself.
Array with_sharding_constraint(const Array& x, const NamedSharding& sharding);

}  // namespace pmap_engine
