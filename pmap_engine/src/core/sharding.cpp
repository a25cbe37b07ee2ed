#include "pmap_engine/sharding.h"

#include <sstream>

namespace pmap_engine {
namespace {

// A Python tuple's repr: "(10,)", "(784, 256)", "()".
std::string python_tuple(const std::vector<int64_t>& values) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << (values.size() == 1 ? ",)" : ")");
  return out.str();
}

}  // namespace

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec)
    : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  for (const PartitionSpec::Entry& entry : spec_.entries()) {
    for (const std::string& axis : entry) mesh_.axis_position(axis);  // throws for a stranger
  }
}

std::string NamedSharding::to_string() const {
  return "NamedSharding(mesh=" + mesh_.to_string() + ", spec=" + spec_.to_string() + ")";
}

void NamedSharding::check_leaf(const Shape& shape, const std::string& what) const {
  const std::vector<PartitionSpec::Entry>& entries = spec_.entries();
  // jax/_src/named_sharding.py, NamedSharding.check_compatible_aval.
  if (shape.size() < entries.size()) {
    throw EngineError("One of " + what + " is incompatible with its sharding annotation " +
                      to_string() + ": Sharding " + to_string() +
                      " is only valid for values of rank at least " +
                      std::to_string(entries.size()) + ", but was applied to a value of rank " +
                      std::to_string(shape.size()) + "." +
                      (shape.empty() ? " For scalars the PartitionSpec should be P()" : ""));
  }
  // jax/_src/sharding.py, _common_shard_shape: the per-dimension tiling factors.
  std::vector<int64_t> factors(shape.size(), 1);
  for (size_t d = 0; d < entries.size(); ++d) {
    for (const std::string& axis : entries[d]) {
      factors[d] *= mesh_.axes()[mesh_.axis_position(axis)].size;
    }
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] % factors[d] == 0) continue;
    throw EngineError("One of " + what + " was given the sharding of " + to_string() +
                      " implies that array axis " + std::to_string(d) + " is partitioned " +
                      std::to_string(factors[d]) + " times, but the dimension size is " +
                      std::to_string(shape[d]) + " (full shape: " + python_tuple(shape) +
                      ", per-dimension tiling factors: " + python_tuple(factors) +
                      " should evenly divide the shape)");
  }
}

}  // namespace pmap_engine
