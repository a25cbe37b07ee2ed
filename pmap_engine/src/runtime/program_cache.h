// What jit and pmap share: tracing a function of pytrees into a program (static arguments
// kept concrete, the others replaced by tracers), a signature for the cache key, and the
// cache of traced programs with its hit/miss counts.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"
#include "runtime/compile.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine::runtime {

struct TracedFunction {
  ir::Program program;
  Tree output;  // the result's structure (its leaves are the program's outputs)
  // What runs: the program compiled (runtime/compile.h); set by ProgramCache::get.
  std::shared_ptr<const Executable> executable;
};

// The shape a leaf has inside the traced function (pmap drops the mapped axis).
using TracedShape = std::function<Shape(size_t argnum, size_t leaf, const Array& value)>;

// The mesh axes a leaf varies along inside the traced function (shard_map's in_specs under
// check_vma, ir/varying_axes.h).
using InputVarying = std::function<ir::VaryingAxes(size_t argnum, size_t leaf)>;

// Traces `function` on `args`; `what` names the transformation in errors ("jit(f)"). Without
// `input_varying` the arguments vary along no axis.
TracedFunction trace_function(const TreeFunction& function, const std::vector<Tree>& args,
                              const std::set<size_t>& static_argnums,
                              const TracedShape& traced_shape, const std::string& what,
                              const InputVarying& input_varying = {});

// Per argument: its tree structure and leaf types; static arguments add their values.
std::string call_signature(const std::vector<Tree>& args, const std::set<size_t>& static_argnums);

class ProgramCache {
 public:
  // The program cached under `signature`, or the one `trace` makes and fusion compiles (a
  // miss: a compilation).
  const TracedFunction& get(const std::string& signature,
                            const std::function<TracedFunction()>& trace);
  CacheStats stats() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, TracedFunction> entries_;
  CacheStats stats_;
};

}  // namespace pmap_engine::runtime
