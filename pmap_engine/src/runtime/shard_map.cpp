// shard_map on the mapped call (runtime/mapped_call.h): in_specs and out_specs are applied to
// every leaf of their argument / output as JAX broadcasts a spec over a pytree.
#include "pmap_engine/shard_map.h"

#include "runtime/mapped_call.h"

namespace pmap_engine {
namespace {

// One spec per top-level entry of `value` (a tuple), or one for all of it.
std::vector<runtime::LeafSharding> broadcast_specs(const std::vector<PartitionSpec>& specs,
                                                   const Tree& value, const char* what) {
  std::vector<runtime::LeafSharding> shardings;
  if (specs.size() == 1) {
    shardings.assign(value.leaves().size(), {specs.front(), std::nullopt});
    return shardings;
  }
  if (value.kind() != Tree::Kind::kTuple || value.children().size() != specs.size()) {
    throw EngineError(std::string("shard_map ") + what + " has " + std::to_string(specs.size()) +
                      " entries but the value is " + value.structure() +
                      "; give one PartitionSpec per tuple entry, or one for all");
  }
  for (size_t c = 0; c < specs.size(); ++c) {
    shardings.insert(shardings.end(), value.children()[c].leaves().size(),
                     {specs[c], std::nullopt});
  }
  return shardings;
}

}  // namespace

struct ShardMapped::State {
  Mesh mesh;
  ShardMapOptions options;
  std::unique_ptr<runtime::MappedFunction> mapped;

  runtime::InShardings in_shardings(const std::vector<Tree>& args) const {
    if (options.in_specs.size() != args.size()) {
      throw EngineError("shard_map in_specs has " + std::to_string(options.in_specs.size()) +
                        " entries for " + std::to_string(args.size()) +
                        " positional arguments; give one PartitionSpec per argument");
    }
    runtime::InShardings in;
    for (size_t a = 0; a < args.size(); ++a) {
      in.push_back(broadcast_specs({options.in_specs[a]}, args[a], "in_specs"));
    }
    return in;
  }

  runtime::OutShardings out_shardings() const {
    return [this](const Tree& output) {
      return broadcast_specs(options.out_specs, output, "out_specs");
    };
  }
};

ShardMapped::ShardMapped(TreeFunction function, Mesh mesh, ShardMapOptions options)
    : state_(std::make_shared<State>(State{std::move(mesh), std::move(options), nullptr})) {
  if (state_->options.out_specs.empty()) {
    throw EngineError(
        "shard_map needs out_specs: one PartitionSpec for all outputs, or one per "
        "tuple entry (PartitionSpec() for a replicated output)");
  }
  runtime::MappedFunctionOptions mapped;
  mapped.what = "shard_map";
  mapped.donate_argnums = state_->options.donate_argnums;
  mapped.check_vma = state_->options.check_vma;
  state_->mapped = std::make_unique<runtime::MappedFunction>(std::move(function), mapped);
}

ShardMapped::~ShardMapped() = default;

Tree ShardMapped::operator()(const std::vector<Tree>& args) const {
  return (*state_->mapped)(state_->mesh, args, state_->in_shardings(args), state_->out_shardings());
}

CacheStats ShardMapped::cache_stats() const { return state_->mapped->cache_stats(); }

MappedExecutionStats ShardMapped::last_execution() const {
  return state_->mapped->last_execution();
}

std::string ShardMapped::program_text(const std::vector<Tree>& args) const {
  return state_->mapped->program_text(state_->mesh, args, state_->in_shardings(args),
                                      state_->out_shardings());
}

ShardMapped shard_map(TreeFunction function, Mesh mesh, ShardMapOptions options) {
  return ShardMapped(std::move(function), std::move(mesh), std::move(options));
}

}  // namespace pmap_engine
