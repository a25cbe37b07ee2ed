// One value's sharding inside a partitioned program: per dimension, the mesh axes that split it
// (a PartitionSpec padded to the value's rank), as XLA's HloSharding tiles a value over the
// devices of a mesh. Axes a value's dimensions do not name are ones it is replicated over.
#pragma once

#include <string>
#include <vector>

#include "pmap_engine/array.h"
#include "pmap_engine/mesh.h"

namespace pmap_engine::runtime {

using AxisList = std::vector<std::string>;

struct ValueSharding {
  std::vector<AxisList> dims;

  static ValueSharding replicated(size_t rank) { return {std::vector<AxisList>(rank)}; }
  // The spec's entries, then unsplit dimensions up to `rank`.
  static ValueSharding of(const PartitionSpec& spec, size_t rank);

  PartitionSpec spec() const;  // trailing unsplit dimensions dropped, as JAX prints specs
  bool is_replicated() const;
  bool uses(const std::string& axis) const;
  // How many blocks the value is cut into: the product of the sizes of the axes it names.
  int64_t tiles(const Mesh& mesh) const;
  bool operator==(const ValueSharding& other) const { return dims == other.dims; }
  bool operator!=(const ValueSharding& other) const { return dims != other.dims; }
};

// The product of the sizes of `axes` on `mesh`.
int64_t axes_size(const Mesh& mesh, const AxisList& axes);
// Each device's block of a value of `global` shape: dimension d divided by its axes' size.
Shape local_shape(const Shape& global, const ValueSharding& sharding, const Mesh& mesh);
// `axes` without those in `removed`, in order.
AxisList without(const AxisList& axes, const AxisList& removed);

}  // namespace pmap_engine::runtime
