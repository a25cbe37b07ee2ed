#include "jit_shardings.h"

#include <fmt/format.h>

#include "parity/common/error.h"

namespace parity::engine_trainer {
namespace {

constexpr const char* kAxis = "data";

// P(None, ..., 'data') with 'data' at `dimension`.
pe::PartitionSpec split_at(size_t dimension) {
  std::vector<pe::PartitionSpec::Entry> entries(dimension + 1);
  entries.back() = {kAxis};
  return pe::PartitionSpec(std::move(entries));
}

std::vector<pe::NamedSharding> leaf_shardings(const std::string& style, const pe::Mesh& mesh,
                                              const pe::Tree& tree) {
  std::vector<pe::NamedSharding> shardings;
  for (const pe::Array& leaf : tree.leaves()) {
    shardings.push_back(style == "jit-fsdp" ? fsdp_sharding(mesh, leaf.shape())
                                            : pe::NamedSharding(mesh, pe::PartitionSpec()));
  }
  return shardings;
}

// The bytes of one device's blocks of `tree`'s leaves.
int64_t block_bytes(const pe::Tree& tree, const std::vector<pe::NamedSharding>& shardings) {
  const std::vector<pe::Array> leaves = tree.leaves();
  size_t bytes = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    bytes += pe::shape_num_elements(shardings[i].shard_shape(leaves[i].shape())) *
             pe::dtype_num_bytes(leaves[i].dtype());
  }
  return static_cast<int64_t>(bytes);
}

bool replicated(const pe::NamedSharding& sharding) { return sharding.spec().entries().empty(); }

}  // namespace

pe::NamedSharding fsdp_sharding(const pe::Mesh& mesh, const pe::Shape& shape) {
  const int64_t devices = mesh.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] % devices == 0) return pe::NamedSharding(mesh, split_at(d));
  }
  return pe::NamedSharding(mesh, pe::PartitionSpec());
}

TrainStepShardings train_step_shardings(const std::string& style, const pe::Mesh& mesh,
                                        const pe::Tree& params, const pe::Tree& opt_state,
                                        const StepSignature& signature) {
  if (style != "jit-dp" && style != "jit-fsdp") {
    throw InternalError("train_step_shardings: '" + style + "' is not a jit style");
  }
  TrainStepShardings out;
  out.params = leaf_shardings(style, mesh, params);
  out.opt_state = leaf_shardings(style, mesh, opt_state);
  const pe::NamedSharding replicated_all(mesh, pe::PartitionSpec());
  const pe::NamedSharding batch_split(mesh, pe::PartitionSpec{{kAxis}});
  const pe::ShardingTree params_tree(out.params);
  const pe::ShardingTree opt_state_tree(out.opt_state);
  // The gradients come out as their parameters are laid out; a clipping step returns the
  // applied and the reduced gradients, two trees shaped like params.
  std::vector<pe::NamedSharding> grads = out.params;
  if (signature.clips()) grads.insert(grads.end(), out.params.begin(), out.params.end());
  // A layers model's batch_stats replicated (a jit style has no dropout: case validation).
  out.in = signature.arguments<pe::ShardingTree>(
      {params_tree, opt_state_tree, batch_split, batch_split, replicated_all, replicated_all});
  out.out = signature.results<pe::ShardingTree>({params_tree, opt_state_tree, replicated_all,
                                                 pe::ShardingTree(grads), replicated_all,
                                                 replicated_all});
  return out;
}

DeviceStateBytes sharded_state_bytes(const std::string& style, const pe::Tree& params,
                                     const pe::Tree& opt_state,
                                     const TrainStepShardings& shardings,
                                     const std::string& separator) {
  DeviceStateBytes bytes;
  bytes.params = block_bytes(params, shardings.params);
  bytes.opt_state = block_bytes(opt_state, shardings.opt_state);
  const int64_t devices = shardings.params.empty() ? 1 : shardings.params.front().mesh().size();
  if (style == "jit-dp") {
    bytes.layout = fmt::format("jit-dp over {} devices: a full copy on every device (P())",
                               devices);
    return bytes;
  }
  const std::vector<pe::Array> leaves = params.leaves();
  const std::vector<std::string> names = params.leaf_paths(separator);
  std::vector<std::string> uneven;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (replicated(shardings.params[i])) {
      uneven.push_back(names[i] + " " + pe::shape_to_string(leaves[i].shape()));
    }
  }
  bytes.layout = fmt::format("jit-fsdp over {} devices: {} of {} parameter leaves split", devices,
                             leaves.size() - uneven.size(), leaves.size());
  if (!uneven.empty()) {
    bytes.layout += fmt::format("; uneven leaves replicated (no dimension divides by {}): {}",
                                devices, fmt::join(uneven, ", "));
  }
  return bytes;
}

}  // namespace parity::engine_trainer
