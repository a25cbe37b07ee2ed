#include "pmap_engine/mesh.h"

#include <set>
#include <sstream>

#include "pmap_engine/dtype.h"

namespace pmap_engine {
namespace {

std::string shape_text(const std::vector<MeshAxis>& axes) {
  std::ostringstream shape;
  for (size_t i = 0; i < axes.size(); ++i) shape << (i ? "x" : "") << axes[i].size;
  return shape.str();
}

}  // namespace

Mesh::Mesh(const DeviceSet& devices, std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  if (axes_.empty()) throw EngineError("a Mesh needs at least one named axis");
  int64_t count = 1;
  std::set<std::string> names;
  for (const auto& axis : axes_) {
    if (axis.size < 1) {
      throw EngineError("Mesh axis '" + axis.name + "' has size " + std::to_string(axis.size) +
                        "; every mesh axis needs at least one device");
    }
    if (!names.insert(axis.name).second) {
      throw EngineError("Mesh axis names must be distinct: '" + axis.name + "' appears twice");
    }
    count *= axis.size;
  }
  if (count > devices.size()) {
    throw EngineError("a Mesh of shape " + shape_text(axes_) + " needs " + std::to_string(count) +
                      " devices but only " + std::to_string(devices.size()) +
                      " are available; set XLA_FLAGS=--xla_force_host_platform_device_count=" +
                      std::to_string(count) + " or give a larger DeviceSet");
  }
  devices_.assign(devices.devices().begin(), devices.devices().begin() + count);
}

size_t Mesh::axis_position(const std::string& axis_name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == axis_name) return i;
  }
  throw EngineError("mesh axis '" + axis_name + "' is not an axis of " + to_string());
}

int64_t Mesh::coordinate(int64_t flat, size_t position) const {
  int64_t stride = 1;
  for (size_t i = position + 1; i < axes_.size(); ++i) stride *= axes_[i].size;
  return (flat / stride) % axes_[position].size;
}

std::string Mesh::to_string() const {
  std::ostringstream out;
  out << "Mesh(";
  for (size_t i = 0; i < axes_.size(); ++i) {
    out << (i ? ", " : "") << "'" << axes_[i].name << "': " << axes_[i].size;
  }
  out << ")";
  return out.str();
}

// As JAX's repr: PartitionSpec('x', None), PartitionSpec(('x', 'y'),), PartitionSpec().
std::string PartitionSpec::to_string() const {
  std::ostringstream out;
  out << "PartitionSpec(";
  for (size_t d = 0; d < entries_.size(); ++d) {
    const Entry& entry = entries_[d];
    out << (d ? ", " : "");
    if (entry.empty()) {
      out << "None";
    } else if (entry.size() == 1) {
      out << "'" << entry[0] << "'";
    } else {
      out << "(";
      for (size_t i = 0; i < entry.size(); ++i) out << (i ? ", " : "") << "'" << entry[i] << "'";
      out << ")";
    }
  }
  out << (entries_.size() == 1 ? ",)" : ")");
  return out.str();
}

}  // namespace pmap_engine
