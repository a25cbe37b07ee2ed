#include "pmap_engine/sharding.h"

#include <sstream>

#include "pmap_engine/jax_release.h"

namespace pmap_engine {

namespace {

// PartitionSpec.__repr__ in the release in effect: "PartitionSpec('data',)" at jax-v0.4.38,
// "P('data',)" at jax-v0.11.0 (jax/_src/partition_spec.py).
std::string spec_repr(const PartitionSpec& spec) {
  const std::string text = spec.to_string();
  if (jax_release() == JaxRelease::kV0_4_38) return text;
  return "P" + text.substr(std::string("PartitionSpec").size());
}

}  // namespace

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec)
    : mesh_(std::move(mesh)), spec_(std::move(spec)) {
  // jax/_src/named_sharding.py _check_mesh_resource_axis (the same sentence at jax-v0.4.38 and
  // jax-v0.11.0), then the fix.
  for (const PartitionSpec::Entry& entry : spec_.entries()) {
    for (const std::string& axis : entry) {
      bool found = false;
      std::string names;  // a Python tuple: ('data',) or ('x', 'y')
      for (const MeshAxis& mesh_axis : mesh_.axes()) {
        found = found || mesh_axis.name == axis;
        names += (names.empty() ? "'" : ", '") + mesh_axis.name + "'";
      }
      if (found) continue;
      if (mesh_.axes().size() == 1) names += ",";
      throw EngineError("Resource axis: " + axis + " of " + spec_repr(spec_) +
                        " is not found in mesh: (" + names +
                        "). Name one of the mesh's axes in the PartitionSpec, or add '" + axis +
                        "' to the Mesh.");
    }
  }
}

// NamedSharding's repr, on the CPU devices the engine models.
//
// jax-v0.4.38 jax/_src/sharding_impls.py NamedSharding.__repr__: the mesh as
// "Mesh('data': 8)" from its shape, the spec as jax/_src/partition_spec.py
// PartitionSpec.__repr__ ("PartitionSpec('data',)"), then memory_kind, which the C++
// constructor canonicalizes to the devices' default: "unpinned_host" on CPU
// (tests/memories_test.py ShardingMemoriesTest.setUp at that tag).
//
// jax-v0.11.0 jax/_src/named_sharding.py NamedSharding.__repr__: str(mesh), jax/_src/mesh.py
// Mesh.__str__ ("Mesh('data': 8, axis_types=(Auto,))", Auto being the default of
// _normalize_axis_types), the spec as jax/_src/partition_spec.py PartitionSpec.__repr__
// ("P('data',)"), and memory_kind=device (jaxlib/sharding.cc CheckAndCanonicalizeMemoryKind;
// tests/memories_test.py expects "device" on every platform at that tag).
std::string NamedSharding::to_string() const {
  const std::string spec = spec_.to_string();  // "PartitionSpec('data',)"
  if (jax_release() == JaxRelease::kV0_4_38) {
    return "NamedSharding(mesh=" + mesh_.to_string() + ", spec=" + spec +
           ", memory_kind=unpinned_host)";
  }
  std::string mesh = mesh_.to_string();  // "Mesh('data': 8)"
  mesh.pop_back();
  mesh += ", axis_types=(";
  for (size_t i = 0; i < mesh_.axes().size(); ++i) mesh += i ? ", Auto" : "Auto";
  mesh += mesh_.axes().size() == 1 ? ",))" : "))";
  const std::string short_spec = "P" + spec.substr(std::string("PartitionSpec").size());
  return "NamedSharding(mesh=" + mesh + ", spec=" + short_spec + ", memory_kind=device)";
}

void NamedSharding::check_leaf(const Shape& shape, const std::string& what,
                               bool allow_uneven) const {
  const std::vector<PartitionSpec::Entry>& entries = spec_.entries();
  // jax/_src/pjit.py pjit_check_aval_sharding wraps NamedSharding.check_compatible_aval's
  // ValueError, the same text at both tags (jax-v0.4.38 jax/_src/sharding_impls.py,
  // jax-v0.11.0 jax/_src/named_sharding.py).
  if (shape.size() < entries.size()) {
    throw EngineError("One of " + what + " is incompatible with its sharding annotation " +
                      to_string() + ": Sharding " + to_string() +
                      " is only valid for values of rank at least " +
                      std::to_string(entries.size()) + ", but was applied to a value of rank " +
                      std::to_string(shape.size()) + "." +
                      (shape.empty() ? " For scalars the PartitionSpec should be P()" : ""));
  }
  // The per-dimension tiling factors (jax/_src/sharding.py _common_shard_shape's partitions).
  std::vector<int64_t> factors(shape.size(), 1);
  for (size_t d = 0; d < entries.size(); ++d) {
    for (const std::string& axis : entries[d]) {
      factors[d] *= mesh_.axes()[mesh_.axis_position(axis)].size;
    }
  }
  for (size_t d = 0; d < shape.size() && !allow_uneven; ++d) {
    if (shape[d] % factors[d] == 0) continue;
    if (jax_release() == JaxRelease::kV0_4_38) {
      // jax-v0.4.38 jax/_src/pjit.py pjit_check_aval_sharding: its own ValueError.
      throw EngineError("One of " + what + " was given the sharding of " + to_string() +
                        ", which implies that the global size of its dimension " +
                        std::to_string(d) + " should be divisible by " +
                        std::to_string(factors[d]) + ", but it is equal to " +
                        std::to_string(shape[d]) + " (full shape: " + python_tuple(shape) + ")");
    }
    // jax-v0.11.0 jax/_src/pjit.py pjit_check_aval_sharding re-raises the IndivisibleError of
    // jax/_src/sharding.py _common_shard_shape after "was given the sharding ", then adds the
    // Python source line ("This error occurs at source: ..."), which the engine has none of.
    throw EngineError("One of " + what + " was given the sharding " + to_string() +
                      " implies that array axis " + std::to_string(d) + " is partitioned " +
                      std::to_string(factors[d]) + " times, but the dimension size is " +
                      std::to_string(shape[d]) + " (full shape: " + python_tuple(shape) +
                      ", per-dimension tiling factors: " + python_tuple(factors) +
                      " should evenly divide the shape).");
  }
}

Shape NamedSharding::shard_shape(const Shape& global_shape) const {
  Shape block = global_shape;
  for (size_t d = 0; d < spec_.entries().size() && d < block.size(); ++d) {
    for (const std::string& axis : spec_.entries()[d]) {
      block[d] /= mesh_.axes()[mesh_.axis_position(axis)].size;
    }
  }
  return block;
}

ShardingTree::ShardingTree(NamedSharding all) : per_leaf_{std::move(all)}, broadcast_(true) {}

ShardingTree::ShardingTree(std::vector<NamedSharding> per_leaf) : per_leaf_(std::move(per_leaf)) {}

const NamedSharding& ShardingTree::leaf(size_t i, size_t num_leaves,
                                        const std::string& what) const {
  if (broadcast_) return per_leaf_.front();
  if (per_leaf_.size() != num_leaves) {
    // jax/_src/api_util.py flatten_axis_resources: a sharding tree that is not a prefix of the
    // value's tree.
    throw EngineError(what + " has " + std::to_string(num_leaves) + " leaves but its sharding "
                      "tree has " + std::to_string(per_leaf_.size()) +
                      "; give one sharding for the whole value or one per leaf");
  }
  return per_leaf_[i];
}

}  // namespace pmap_engine
