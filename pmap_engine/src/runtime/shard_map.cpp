// shard_map on the mapped call (runtime/mapped_call.h): in_specs and out_specs are applied to
// every leaf of their argument / output as JAX broadcasts a spec over a pytree.
#include "pmap_engine/shard_map.h"

#include "runtime/mapped_placement.h"

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

// out_specs are needed before anything else: without them no output can be assembled.
runtime::MappedFunctionOptions mapped_function_options(const ShardMapOptions& options) {
  if (options.out_specs.empty()) {
    throw EngineError(
        "shard_map needs out_specs: one PartitionSpec for all outputs, or one per "
        "tuple entry (PartitionSpec() for a replicated output)");
  }
  runtime::MappedFunctionOptions mapped;
  mapped.what = "shard_map";
  mapped.donate_argnums = options.donate_argnums;
  mapped.check_vma = options.check_vma;
  return mapped;
}

class ShardMapPlacement : public Mapped::Placement {
 public:
  ShardMapPlacement(TreeFunction function, Mesh mesh, ShardMapOptions options)
      : Placement(runtime::MappedFunction(std::move(function), mapped_function_options(options))),
        mesh_(std::move(mesh)),
        options_(std::move(options)) {}

  Layout layout(const std::vector<Tree>& args) const override {
    return {mesh_, in_shardings(args), out_shardings(), std::nullopt};
  }

 private:
  Mesh mesh_;
  ShardMapOptions options_;

  runtime::InShardings in_shardings(const std::vector<Tree>& args) const {
    if (options_.in_specs.size() != args.size()) {
      throw EngineError("shard_map in_specs has " + std::to_string(options_.in_specs.size()) +
                        " entries for " + std::to_string(args.size()) +
                        " positional arguments; give one PartitionSpec per argument");
    }
    runtime::InShardings in;
    for (size_t a = 0; a < args.size(); ++a) {
      in.push_back(broadcast_specs({options_.in_specs[a]}, args[a], "in_specs"));
    }
    return in;
  }

  runtime::OutShardings out_shardings() const {
    return [this](const Tree& output) {
      return broadcast_specs(options_.out_specs, output, "out_specs");
    };
  }
};

}  // namespace

ShardMapped::ShardMapped(TreeFunction function, Mesh mesh, ShardMapOptions options)
    : Mapped(std::make_shared<ShardMapPlacement>(std::move(function), std::move(mesh),
                                                 std::move(options))) {}

ShardMapped shard_map(TreeFunction function, Mesh mesh, ShardMapOptions options) {
  return ShardMapped(std::move(function), std::move(mesh), std::move(options));
}

}  // namespace pmap_engine
