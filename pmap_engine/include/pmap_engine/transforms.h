// Transformations: jit (trace once per signature, then run the program), value_and_grad
// (reverse mode on the traced program), and the debugging aids JAX users reach for.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pmap_engine/sharding.h"
#include "pmap_engine/tree.h"

namespace pmap_engine {

// A function of pytrees: the form every transformation takes and returns.
using TreeFunction = std::function<Tree(const std::vector<Tree>& args)>;

struct JitOptions {
  // Arguments whose values (not just shapes) are part of the signature: they stay concrete
  // inside the function, so it may branch on them; a new value recompiles.
  std::set<size_t> static_argnums;
  // Arguments the caller gives up: their buffers may be updated in place (donate_argnums).
  std::set<size_t> donate_argnums;
  // in_shardings: a tuple with one entry per non-static positional argument: one sharding for
  // all its leaves, or one per leaf (a pytree of shardings). Every call checks them before
  // tracing, with JAX's errors (a tuple of another length; a leaf of too low a rank or a
  // dimension that does not divide). The program is then partitioned as XLA's SPMD
  // partitioner does (sharding.h): each device runs its block of the computation, with the
  // collectives the shardings imply. Unset: the whole program on one device.
  std::optional<std::vector<ShardingTree>> in_shardings;
  // out_shardings: one entry per top-level output (tuple entry), or a single one for all of
  // them; only with in_shardings. Unset: each output keeps the sharding propagation gave it.
  std::optional<std::vector<ShardingTree>> out_shardings;
  // The function's parameter names, one per positional argument, as JAX takes them from its
  // Python signature to name a leaf in an error: "params['dense1']['bias']". Unset, or not one
  // per argument: "args[0]['dense1']['bias']", JAX's names when the signature does not bind
  // (jax/_src/api_util.py _non_static_arg_names).
  std::vector<std::string> arg_names;
};

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;  // traces (compilations)
  // The last miss, cold: tracing the function, then compiling its program (runtime/compile.h).
  double last_trace_seconds = 0;
  double last_compile_seconds = 0;
  // What the compilation made of it: equations that run, and traced ones fused or folded.
  int64_t compiled_equations = 0;
  int64_t fused_equations = 0;
  int64_t folded_transposes = 0;
};

struct ExecutionStats {
  // Live buffers at the worst point of the last run, exact; per device for a sharded jit.
  int64_t peak_bytes = 0;
  // What the run held at its worst point: live buffers and dead storage kept for reuse.
  int64_t peak_footprint_bytes = 0;
  int64_t num_ops = 0;
  int64_t donated_reuses = 0;  // outputs written into donated input buffers
  int64_t num_devices = 1;     // the mesh's, for a sharded jit
  int64_t num_collectives = 0;  // collectives the partitioned program ran
};

class Jitted {
 public:
  Jitted(TreeFunction function, JitOptions options, std::string name);
  ~Jitted();
  Tree operator()(const std::vector<Tree>& args) const;

  CacheStats cache_stats() const;
  ExecutionStats last_execution() const;
  // The program traced for these arguments (tracing it if needed), like jax.make_jaxpr.
  std::string program_text(const std::vector<Tree>& args) const;
  // With in_shardings: every value's sharding after propagation, the per-device program after
  // partitioning with the collectives it inserted (XLA's HLO after its SPMD partitioner), and
  // the per-device memory plan. Throws EngineError without in_shardings.
  std::string partitioned_program_text(const std::vector<Tree>& args) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

Jitted jit(TreeFunction function, JitOptions options = {}, std::string name = "f");

// value_and_grad(f)(args): f returns a scalar loss (or a tuple (loss, aux) with has_aux);
// returns (loss, grads) or ((loss, aux), grads) as a tuple Tree. Gradients are taken with
// respect to the arguments in argnums (a tuple of grads when there are several).
TreeFunction value_and_grad(TreeFunction function, std::vector<size_t> argnums = {0},
                            bool has_aux = false);
TreeFunction grad(TreeFunction function, std::vector<size_t> argnums = {0}, bool has_aux = false);

// The traced program of `function` for `args` as text, like jax.make_jaxpr.
std::string make_program(const TreeFunction& function, const std::vector<Tree>& args);

// jax.eval_shape(f, *args): the types of f's outputs, from the types of its arguments alone.
// f is traced, as jit traces it, on tracers of each leaf's shape and dtype; nothing runs and no
// argument or output is allocated, so a model of any size can be measured. Leaves of `args` may
// be concrete arrays or Array::shape_dtype_struct; every argument is dynamic (JAX's: "All
// arguments passed via eval_shape will be treated as dynamic"). Returns f's output tree with a
// ShapeDtypeStruct at each leaf. Shape errors are the ones calling f would raise.
Tree eval_shape(const TreeFunction& function, const std::vector<Tree>& args);

// jax.disable_jit(): while an instance lives, jit runs functions op by op. PE_DISABLE_JIT=1
// in the environment does the same for the whole process.
class DisableJit {
 public:
  DisableJit();
  ~DisableJit();
  DisableJit(const DisableJit&) = delete;
  DisableJit& operator=(const DisableJit&) = delete;
};
bool jit_disabled();

// jax.debug.print: prints `label: value` when the value is computed, in both modes (inside a
// jit it becomes part of the program). Returns x.
Array debug_print(const std::string& label, const Array& x);

}  // namespace pmap_engine
