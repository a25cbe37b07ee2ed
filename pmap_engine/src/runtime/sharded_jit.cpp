#include "runtime/sharded_jit.h"

#include <sstream>

#include "ops/sharding_constraint.h"
#include "runtime/sharding_propagation.h"
#include "runtime/transposed_dots.h"

namespace pmap_engine::runtime {
namespace {

std::string device_ids(const Mesh& mesh) {
  std::string ids;
  for (const Device& device : mesh.devices()) {
    ids += (ids.empty() ? "" : ", ") + std::to_string(device.id);
  }
  return "[" + ids + "]";
}

bool same_mesh(const Mesh& a, const Mesh& b) {
  return a.to_string() == b.to_string() && device_ids(a) == device_ids(b);
}

// One side of JAX's device assignment mismatch (jax/_src/stages.py, jax-v0.11.0:
// DeviceAssignmentMismatch._str, the same words as jax-v0.4.38's pxla.py): " ARG_SHARDING with
// device ids [0, 1, 2, 3] on platform CPU". The engine's arguments are uncommitted host
// arrays, which _find_arg_mismatch matches to no argument, so JAX names each side by its
// MismatchType: ARG_SHARDING (an in_sharding), "explicit output sharding" (an out_sharding),
// "sharding_constraint inside jit" (JAX adds " at <source line>", which the engine has none of).
std::string mismatch_side(const std::string& what, const Mesh& mesh) {
  const bool gpu = mesh.devices().front().platform == Platform::kCuda;  // JAX's 'gpu'
  return " " + what + " with device ids " + device_ids(mesh) + " on platform " +
         (gpu ? "GPU" : "CPU");
}

// jax/_src/stages.py _device_assignment_mismatch_error, then the engine's fix. JAX compares
// device assignments only; meshes of the same devices on other axes pass its check, and the
// engine, which partitions over one Mesh, refuses them in its own words.
std::string mismatch_error(const Mesh& first, const std::string& what, const Mesh& other,
                           const std::string& fix) {
  if (device_ids(first) == device_ids(other)) {
    return "jit partitions over one Mesh, but the shardings name " + first.to_string() +
           " and " + other.to_string() + " (the same devices, other axes). " + fix;
  }
  return "Received incompatible devices for jitted computation. Got" +
         mismatch_side("ARG_SHARDING", first) + " and" + mismatch_side(what, other) + ". " + fix;
}

// "args[0].dense0.bias", "args[2]"
std::string argument_path(size_t argnum, const std::string& inner) {
  return "args[" + std::to_string(argnum) + "]" +
         (inner.empty() || inner[0] == '[' ? inner : "." + inner);
}

// Per argument, per leaf: its NamedSharding. Every leaf's mesh must be the first one's
// (jax/_src/interpreters/pxla.py _get_and_check_device_assignment raises
// DeviceAssignmentMismatchError, "Received incompatible devices for jitted computation").
std::vector<std::vector<NamedSharding>> argument_shardings(const std::vector<Tree>& args,
                                                           const JitShardings& shardings,
                                                           const std::string& name) {
  std::vector<std::vector<NamedSharding>> result(args.size());
  std::optional<std::pair<std::string, NamedSharding>> first;
  size_t entry = 0;
  for (size_t a = 0; a < args.size(); ++a) {
    if (shardings.static_argnums.count(a)) continue;
    const std::vector<Array> leaves = args[a].leaves();
    const std::vector<std::string> paths = args[a].leaf_paths();
    for (size_t l = 0; l < leaves.size(); ++l) {
      const NamedSharding& sharding = shardings.in.at(entry).leaf(
          l, leaves.size(), "pjit in_shardings entry " + std::to_string(entry));
      const std::string where = argument_path(a, paths[l]) + " of " + name + " with shape " +
                                shape_to_string(leaves[l].shape());
      if (!first) {
        first.emplace(where, sharding);
      } else if (!same_mesh(first->second.mesh(), sharding.mesh())) {
        throw EngineError(mismatch_error(
            first->second.mesh(), "ARG_SHARDING", sharding.mesh(),
            "Put every in_sharding on the same Mesh: " + where + " is on another Mesh than " +
                first->first + "."));
      }
      result[a].push_back(sharding);
    }
    ++entry;
  }
  return result;
}

// The global program as the partitioner sees it: XLA simplifies the HLO before SPMD
// partitioning (the spmd-simplify pipeline runs AlgebraicSimplifier), so a transposed product
// is already the product of the swapped operands (runtime/transposed_dots.h). Folded later, the
// transpose would be stranded behind the all-reduce of the product's partial sums.
ir::Program simplified(const ir::Program& traced) {
  Executable executable;
  executable.program = traced;
  fold_transposed_dots(executable);
  return std::move(executable.program);
}

}  // namespace

ShardedCall::ShardedCall(const TracedFunction& traced, const std::vector<Tree>& args,
                         const JitShardings& shardings, const std::string& name)
    : in_(args.size()) {
  const auto in_leaves = argument_shardings(args, shardings, name);
  const Mesh* mesh = nullptr;
  for (const auto& leaves : in_leaves) {
    if (!leaves.empty()) mesh = &leaves.front().mesh();
  }
  if (mesh == nullptr) throw EngineError("jit(" + name + "): in_shardings given for no array");
  const ir::Program program = simplified(traced.program);
  std::vector<std::optional<ValueSharding>> fixed(program.vars.size());
  size_t input = 0;
  for (size_t a = 0; a < args.size(); ++a) {
    for (const NamedSharding& sharding : in_leaves[a]) {
      const int var = program.inputs.at(input++);
      fixed[static_cast<size_t>(var)] =
          ValueSharding::of(sharding.spec(), program.vars[static_cast<size_t>(var)].shape.size());
      in_[a].push_back(LeafSharding{sharding.spec(), std::nullopt});
    }
  }
  for (const ir::Equation& eq : program.equations) {
    if (eq.primitive->name != "sharding_constraint") continue;
    const NamedSharding& sharding = constraint_sharding(eq.params);
    if (!same_mesh(sharding.mesh(), *mesh)) continue;  // refused below, in JAX's order
    const Shape& shape = program.vars[static_cast<size_t>(eq.outputs[0])].shape;
    ValueSharding constraint = ValueSharding::of(sharding.spec(), shape.size());
    // An uneven constraint (JAX allows it and XLA pads the last blocks) keeps the dim whole.
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] % axes_size(*mesh, constraint.dims[d]) != 0) constraint.dims[d].clear();
    }
    fixed[static_cast<size_t>(eq.outputs[0])] = constraint;
  }

  // out_shardings: checked as jax/_src/pjit.py checks "pjit outputs" (allow_uneven_sharding
  // False), then fixed on the output variables that are not arguments.
  std::vector<std::optional<ValueSharding>> out_fixed(program.outputs.size());
  if (shardings.out) {
    const std::vector<Tree> tops = traced.output.kind() == Tree::Kind::kTuple
                                       ? traced.output.children()
                                       : std::vector<Tree>{traced.output};
    if (shardings.out->size() != 1 && shardings.out->size() != tops.size()) {
      throw EngineError("pjit out_shardings specification must be a tree prefix of the "
                        "corresponding value, got " + std::to_string(shardings.out->size()) +
                        " shardings for " + std::to_string(tops.size()) +
                        " outputs; give one per output or one for all");
    }
    const std::vector<std::string> result_paths = traced.output.key_paths();
    size_t o = 0;
    for (size_t t = 0; t < tops.size(); ++t) {
      const ShardingTree& tree = shardings.out->size() == 1 ? shardings.out->front()
                                                             : (*shardings.out)[t];
      const std::vector<std::string> paths = tops[t].leaf_paths();
      for (size_t l = 0; l < paths.size(); ++l, ++o) {
        const NamedSharding& sharding =
            tree.leaf(l, paths.size(), "pjit out_shardings entry " + std::to_string(t));
        if (!same_mesh(sharding.mesh(), *mesh)) {
          throw EngineError(mismatch_error(
              *mesh, "explicit output sharding", sharding.mesh(),
              "Put every sharding on the same Mesh: out_shardings entry " + std::to_string(t) +
                  " is on another Mesh than the in_shardings."));
        }
        const int var = program.outputs[o];
        const Shape& shape = program.vars[static_cast<size_t>(var)].shape;
        // The result's key path, as jax/_src/linear_util.py DebugInfo.set_result_paths writes
        // it: "result" for a single array, "result[1]", "result[0]['w']" inside a tuple.
        sharding.check_leaf(shape, "pjit outputs with pytree key path result" + result_paths[o]);
        out_fixed[o] = ValueSharding::of(sharding.spec(), shape.size());
        if (!fixed[static_cast<size_t>(var)]) fixed[static_cast<size_t>(var)] = out_fixed[o];
      }
    }
  }

  // Shardings inside the computation come last in JAX's device check
  // (jax/_src/interpreters/pxla.py lower_sharding_computation: in, out, then intermediate).
  for (const ir::Equation& eq : program.equations) {
    if (eq.primitive->name != "sharding_constraint") continue;
    const NamedSharding& sharding = constraint_sharding(eq.params);
    if (!same_mesh(sharding.mesh(), *mesh)) {
      throw EngineError(mismatch_error(
          *mesh, "sharding_constraint inside jit", sharding.mesh(),
          "Give with_sharding_constraint a NamedSharding on the in_shardings' Mesh."));
    }
  }

  sharded_ = std::make_shared<ShardedProgram>(ShardedProgram{
      *mesh, program, traced.output, shardings.static_argnums, {}, {}});
  sharded_->shardings = propagate_shardings(program, *mesh, fixed);
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    sharded_->output_shardings.push_back(
        out_fixed[o] ? *out_fixed[o]
                     : sharded_->shardings[static_cast<size_t>(program.outputs[o])]);
  }
  MappedFunctionOptions options;
  options.what = "jit(" + name + ")";
  options.static_argnums = shardings.static_argnums;
  options.donate_argnums = shardings.donate_argnums;
  options.replicated_by_construction = true;
  mapped_ = std::make_unique<MappedFunction>(partitioned_function(sharded_), options);
}

OutShardings ShardedCall::out_shardings() const {
  return [sharded = sharded_](const Tree&) {
    std::vector<LeafSharding> out;
    for (const ValueSharding& sharding : sharded->output_shardings) {
      out.push_back(LeafSharding{sharding.spec(), std::nullopt});
    }
    return out;
  };
}

Tree ShardedCall::operator()(const std::vector<Tree>& args) const {
  return (*mapped_)(sharded_->mesh, args, in_, out_shardings());
}

ExecutionStats ShardedCall::last_execution() const {
  const MappedExecutionStats mapped = mapped_->last_execution();
  ExecutionStats stats;
  stats.peak_bytes = mapped.peak_bytes_per_device;
  stats.peak_footprint_bytes = mapped.peak_footprint_bytes_per_device;
  stats.num_ops = mapped.num_ops;
  stats.donated_reuses = mapped.donated_reuses;
  stats.num_devices = sharded_->mesh.size();
  stats.num_collectives = mapped.num_collectives;
  return stats;
}

}  // namespace pmap_engine::runtime
