// Mesh and PartitionSpec, as jax.sharding.Mesh and jax.sharding.PartitionSpec.
//
// A Mesh lays devices out on named axes, row-major: Mesh(devices, {{"x", 2}, {"y", 4}}) puts
// device 4*i + j at coordinates (x=i, y=j), as np.array(devices).reshape(2, 4) does for
// Mesh(..., ('x', 'y')). A PartitionSpec says, per array dimension, which mesh axes split it:
//
//   PartitionSpec{}                   P()            every device holds the whole array
//   PartitionSpec{{"data"}}           P('data')      dim 0 split in blocks over 'data'
//   PartitionSpec{{}, {"y"}}          P(None, 'y')   dim 1 split over 'y'
//   PartitionSpec{{"x", "y"}}         P(('x','y'))   dim 0 split over 'x' then 'y' (x major)
//
// Trailing dimensions the spec does not mention are not split. Mesh axes a spec does not name
// are ones the value is replicated over.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pmap_engine/device.h"

namespace pmap_engine {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

class Mesh {
 public:
  // The first product-of-sizes devices of `devices`, laid out row-major on `axes`. Axis names
  // must be distinct and sizes positive; the set must hold enough devices.
  Mesh(const DeviceSet& devices, std::vector<MeshAxis> axes);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  const std::vector<Device>& devices() const { return devices_; }  // row-major order
  int64_t size() const { return static_cast<int64_t>(devices_.size()); }

  // The position of `axis_name` in axes(); throws EngineError listing the mesh's axes.
  size_t axis_position(const std::string& axis_name) const;
  // Device `flat`'s coordinate on axis `position`.
  int64_t coordinate(int64_t flat, size_t position) const;
  // "Mesh('x': 2, 'y': 4)", as jax prints a Mesh's shape.
  std::string to_string() const;

 private:
  std::vector<MeshAxis> axes_;
  std::vector<Device> devices_;
};

class PartitionSpec {
 public:
  using Entry = std::vector<std::string>;  // mesh axes splitting one dimension; empty: None

  PartitionSpec() = default;
  PartitionSpec(std::initializer_list<Entry> entries) : entries_(entries) {}
  explicit PartitionSpec(std::vector<Entry> entries) : entries_(std::move(entries)) {}

  const std::vector<Entry>& entries() const { return entries_; }
  // "P()", "P('data')", "P(None, 'y')", "P(('x', 'y'),)".
  std::string to_string() const;

 private:
  std::vector<Entry> entries_;
};

}  // namespace pmap_engine
