// jit: trace once per signature, then run the program.
//
// The signature of a call is, per argument, its tree structure and each leaf's dtype and
// shape; static arguments add their values. A call whose signature is cached runs the
// program (a hit); a new signature traces the function again (a miss: a recompilation,
// pitfall P14, which the counts make visible).
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>

#include "ir/trace.h"
#include "pmap_engine/jax_release.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"
#include "runtime/executor.h"
#include "runtime/program_cache.h"
#include "runtime/sharded_jit.h"

namespace pmap_engine {
namespace {

thread_local int disable_jit_depth = 0;

bool disabled_by_environment() {
  static const bool disabled = [] {
    const char* value = std::getenv("PE_DISABLE_JIT");
    return value != nullptr && std::string(value) != "" && std::string(value) != "0";
  }();
  return disabled;
}

// flatten_axis_resources's tree-prefix error for in_shardings with `given` entries for `args`
// positional arguments. The "But ... is the wrong length" sentence is the same at both tags;
// the lead differs:
//   jax-v0.4.38 jax/_src/pjit.py flatten_axis_resources
//   jax-v0.11.0 jax/_src/api_util.py flatten_axis_resources
std::string wrong_length_text(size_t given, size_t args) {
  const std::string lead =
      jax_release() == JaxRelease::kV0_4_38
          ? "pjit in_shardings specification must be a tree prefix of the positional "
            "arguments tuple passed to the `pjit`-decorated function. In particular, pjit "
            "in_shardings must either be a None, a PartitionSpec, or a tuple of length equal "
            "to the number of positional arguments."
          : "pjit in_shardings specification must be a tree prefix of the positional "
            "arguments tuple. In particular, pjit in_shardings must either be a Sharding, a "
            "PartitionSpec, or a tuple of length equal to the number of positional arguments.";
  return lead + " But pjit in_shardings is the wrong length: got a tuple or list of length " +
         std::to_string(given) + " for an args tuple of length " + std::to_string(args) + ".";
}

}  // namespace

struct Jitted::State {
  TreeFunction function;
  JitOptions options;
  std::string name;
  runtime::ProgramCache cache;
  mutable std::mutex mutex;  // guards `last`, `sharded` and `last_sharded`
  ExecutionStats last;
  // With in_shardings: per signature, the partitioned program; and the one that ran last.
  std::map<std::string, std::shared_ptr<const runtime::ShardedCall>> sharded;
  std::shared_ptr<const runtime::ShardedCall> last_sharded;

  bool is_static(size_t argnum) const { return options.static_argnums.count(argnum) > 0; }

  std::string argument_name(size_t index, size_t num_args) const {
    if (options.arg_names.size() == num_args) return options.arg_names[index];
    return "args[" + std::to_string(index) + "]";
  }

  // jax/_src/pjit.py _process_in_axis_resources: flatten_axis_resources refuses a tuple that
  // is not as long as the arguments, then pjit_check_aval_sharding checks every leaf, in
  // flatten order.
  void check_in_shardings(const std::vector<Tree>& args) const {
    const std::vector<ShardingTree>& shardings = *options.in_shardings;
    std::vector<size_t> dynamic;
    for (size_t a = 0; a < args.size(); ++a) {
      if (!is_static(a)) dynamic.push_back(a);
    }
    if (shardings.size() != dynamic.size()) {
      throw EngineError(wrong_length_text(shardings.size(), dynamic.size()));
    }
    for (size_t i = 0; i < dynamic.size(); ++i) {
      const Tree& arg = args[dynamic[i]];
      const std::vector<Array> leaves = arg.leaves();
      const std::vector<std::string> paths = arg.key_paths();
      for (size_t l = 0; l < leaves.size(); ++l) {
        // params['dense0']['bias'], or args[0]['dense0']['bias'] without a name for each
        // argument (jax/_src/api_util.py _non_static_arg_names).
        const std::string path = argument_name(dynamic[i], args.size()) + paths[l];
        shardings[i]
            .leaf(l, leaves.size(), "pjit in_shardings entry " + std::to_string(i))
            .check_leaf(leaves[l].shape(), "pjit arguments with pytree key path " + path);
      }
    }
  }

  // The partitioned program for these arguments, partitioning it on first use.
  std::shared_ptr<const runtime::ShardedCall> sharded_call(const std::vector<Tree>& args) {
    const std::string signature = runtime::call_signature(args, options.static_argnums);
    const runtime::TracedFunction& traced = cache.get(signature, [&] { return trace(args); });
    std::lock_guard<std::mutex> lock(mutex);
    auto& call = sharded[signature];
    if (!call) {
      runtime::JitShardings shardings{*options.in_shardings, options.out_shardings,
                                      options.static_argnums, options.donate_argnums};
      call = std::make_shared<const runtime::ShardedCall>(traced, args, shardings, name);
    }
    return call;
  }

  runtime::TracedFunction trace(const std::vector<Tree>& args) const {
    return runtime::trace_function(
        function, args, options.static_argnums,
        [](size_t, size_t, const Array& leaf) { return leaf.shape(); }, "jit(" + name + ")");
  }
};

Jitted::Jitted(TreeFunction function, JitOptions options, std::string name)
    : state_(std::make_shared<State>()) {
  state_->function = std::move(function);
  state_->options = std::move(options);
  state_->name = std::move(name);
}

Jitted::~Jitted() = default;

Tree Jitted::operator()(const std::vector<Tree>& args) const {
  State& state = *state_;
  // Op by op under disable_jit, and inline inside another trace (its program includes ours).
  if (state.options.in_shardings) state.check_in_shardings(args);
  if (jit_disabled() || ir::TraceContext::current() != nullptr) return state.function(args);
  if (state.options.in_shardings) {
    const auto call = state.sharded_call(args);
    Tree result = (*call)(args);
    std::lock_guard<std::mutex> lock(state.mutex);
    state.last_sharded = call;
    return result;
  }
  if (state.options.out_shardings) {
    throw EngineError("jit(" + state.name + "): out_shardings without in_shardings; give "
                      "in_shardings for the arguments too");
  }

  const runtime::TracedFunction* compiled =
      &state.cache.get(runtime::call_signature(args, state.options.static_argnums),
                       [&] { return state.trace(args); });

  std::vector<Buffer> inputs;
  std::vector<bool> donated;
  for (size_t a = 0; a < args.size(); ++a) {
    if (state.is_static(a)) continue;
    const bool donate = state.options.donate_argnums.count(a) > 0;
    for (auto leaf : args[a].leaves()) {
      inputs.push_back(donate ? leaf.donate() : leaf.buffer("jit argument"));
      donated.push_back(donate);
    }
  }
  runtime::ExecutionResult result =
      runtime::execute(compiled->executable->program, std::move(inputs), donated);
  result.stats.num_ops = static_cast<int64_t>(compiled->program.equations.size());
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.last = result.stats;
  }
  std::vector<Array> outputs;
  for (auto& buffer : result.outputs) outputs.emplace_back(std::move(buffer));
  return compiled->output.unflatten(outputs);
}

CacheStats Jitted::cache_stats() const { return state_->cache.stats(); }

ExecutionStats Jitted::last_execution() const {
  std::shared_ptr<const runtime::ShardedCall> sharded;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->last_sharded) return state_->last;
    sharded = state_->last_sharded;
  }
  return sharded->last_execution();
}

std::string Jitted::program_text(const std::vector<Tree>& args) const {
  return state_->trace(args).program.to_string();
}

std::string Jitted::partitioned_program_text(const std::vector<Tree>& args) const {
  if (!state_->options.in_shardings) {
    throw EngineError("jit(" + state_->name + ") has no in_shardings: nothing is partitioned; "
                      "pass in_shardings (NamedSharding over a Mesh) to see the per-device "
                      "program");
  }
  state_->check_in_shardings(args);
  return state_->sharded_call(args)->text(args);
}

Jitted jit(TreeFunction function, JitOptions options, std::string name) {
  return Jitted(std::move(function), std::move(options), std::move(name));
}

std::string make_program(const TreeFunction& function, const std::vector<Tree>& args) {
  return jit(function).program_text(args);
}

DisableJit::DisableJit() { ++disable_jit_depth; }
DisableJit::~DisableJit() { --disable_jit_depth; }
bool jit_disabled() { return disable_jit_depth > 0 || disabled_by_environment(); }

}  // namespace pmap_engine
