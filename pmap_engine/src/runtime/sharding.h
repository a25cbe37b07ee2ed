// How a global array is laid out over a mesh: each device's block, by PartitionSpec.
//
// Vocabulary:
//   split factor  of a dimension: the product of the sizes of the mesh axes its spec entry
//                 names (1 when none); the dimension must divide evenly by it.
//   block         one device's part: every dimension divided by its split factor. Device p's
//                 block index along a dimension is its coordinates on that entry's axes read
//                 as a mixed-radix number, first axis most significant (P(('x','y')): x*|y|+y).
//   squeezed dim  pmap's mapped dimension: its block has size 1 and the function sees the
//                 block without it (jax-v0.11.0 jax/_src/pmap.py: _cached_shard_map's _fun
//                 squeezes it inside the traced function; the engine drops it at the
//                 boundary, so the printed program is pmap's per-device program with no
//                 squeeze equations).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pmap_engine/array.h"
#include "pmap_engine/mesh.h"

namespace pmap_engine::runtime {

struct LeafSharding {
  PartitionSpec spec;
  std::optional<int64_t> squeezed_dim;
};

// The validated layout of one leaf over one mesh.
class BlockLayout {
 public:
  // Checks `sharding` against the leaf's global shape and the mesh: spec no longer than the
  // rank, axes that exist and appear once, even divisibility (JAX's shard_map wording;
  // `where` names the argument or output in messages).
  BlockLayout(const Mesh& mesh, const LeafSharding& sharding, const Shape& global_shape,
              const std::string& where);
  // The layout of an output whose per-device value has `device_shape`.
  static BlockLayout for_output(const Mesh& mesh, const LeafSharding& sharding,
                                const Shape& device_shape, const std::string& where);

  const Shape& global_shape() const { return global_; }
  const Shape& block_shape() const { return block_; }  // with the squeezed dim (size 1)
  Shape device_shape() const;                          // as the function sees it
  bool is_split() const;                               // any dimension split at all
  // Bitmask of the mesh axes the spec names (bit = axis position).
  uint64_t named_axes() const { return named_axes_; }

  // Device p's block of `global` (a fresh buffer), with the squeezed dim removed.
  Buffer extract(const Buffer& global, int64_t device) const;
  // Writes device p's block into `global`.
  void insert(const Buffer& device_value, int64_t device, Buffer& global) const;

 private:
  std::vector<int64_t> block_offsets(int64_t device) const;

  const Mesh* mesh_;
  LeafSharding sharding_;
  Shape global_;
  Shape block_;
  std::vector<std::vector<size_t>> entry_axes_;  // per dim, mesh axis positions
  uint64_t named_axes_ = 0;
};

}  // namespace pmap_engine::runtime
