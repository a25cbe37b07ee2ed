#include "runtime/value_sharding.h"

#include <algorithm>

namespace pmap_engine::runtime {

ValueSharding ValueSharding::of(const PartitionSpec& spec, size_t rank) {
  ValueSharding sharding = replicated(rank);
  for (size_t d = 0; d < spec.entries().size() && d < rank; ++d) {
    sharding.dims[d] = spec.entries()[d];
  }
  return sharding;
}

PartitionSpec ValueSharding::spec() const {
  std::vector<PartitionSpec::Entry> entries = dims;
  while (!entries.empty() && entries.back().empty()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

bool ValueSharding::is_replicated() const {
  return std::all_of(dims.begin(), dims.end(), [](const AxisList& axes) { return axes.empty(); });
}

bool ValueSharding::uses(const std::string& axis) const {
  return std::any_of(dims.begin(), dims.end(), [&](const AxisList& axes) {
    return std::find(axes.begin(), axes.end(), axis) != axes.end();
  });
}

int64_t ValueSharding::tiles(const Mesh& mesh) const {
  int64_t tiles = 1;
  for (const AxisList& axes : dims) tiles *= axes_size(mesh, axes);
  return tiles;
}

int64_t axes_size(const Mesh& mesh, const AxisList& axes) {
  int64_t size = 1;
  for (const std::string& axis : axes) size *= mesh.axes()[mesh.axis_position(axis)].size;
  return size;
}

Shape local_shape(const Shape& global, const ValueSharding& sharding, const Mesh& mesh) {
  Shape local = global;
  for (size_t d = 0; d < local.size() && d < sharding.dims.size(); ++d) {
    local[d] /= axes_size(mesh, sharding.dims[d]);
  }
  return local;
}

AxisList without(const AxisList& axes, const AxisList& removed) {
  AxisList kept;
  for (const std::string& axis : axes) {
    if (std::find(removed.begin(), removed.end(), axis) == removed.end()) kept.push_back(axis);
  }
  return kept;
}

}  // namespace pmap_engine::runtime
