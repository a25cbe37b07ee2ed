#include "runtime/program_cache.h"

#include <chrono>
#include <sstream>

#include "ir/trace.h"

namespace pmap_engine::runtime {

TracedFunction trace_function(const TreeFunction& function, const std::vector<Tree>& args,
                              const std::set<size_t>& static_argnums,
                              const TracedShape& traced_shape, const std::string& what,
                              const InputVarying& input_varying) {
  TracedFunction traced;
  ir::TraceContext trace;
  std::vector<Tree> tracer_args;
  for (size_t a = 0; a < args.size(); ++a) {
    if (static_argnums.count(a)) {
      tracer_args.push_back(args[a]);
      continue;
    }
    std::vector<Array> leaves = args[a].leaves();
    std::vector<Array> tracers;
    for (size_t i = 0; i < leaves.size(); ++i) {
      tracers.push_back(trace.new_input(leaves[i].dtype(), traced_shape(a, i, leaves[i]),
                                        input_varying ? input_varying(a, i) : ir::VaryingAxes{}));
    }
    tracer_args.push_back(args[a].unflatten(tracers));
  }
  traced.output = function(tracer_args);
  std::vector<Array> captured;
  traced.program = trace.finish(traced.output.leaves(), &captured);
  if (!captured.empty()) {
    throw EngineError(what +
                      ": the function closes over a traced value of an enclosing "
                      "transformation; pass it as an argument instead");
  }
  return traced;
}

std::string call_signature(const std::vector<Tree>& args, const std::set<size_t>& static_argnums) {
  std::ostringstream out;
  for (size_t a = 0; a < args.size(); ++a) {
    const bool is_static = static_argnums.count(a) > 0;
    out << (is_static ? "static " : "") << args[a].structure() << ":";
    for (const auto& leaf : args[a].leaves()) {
      out << type_to_string(leaf.dtype(), leaf.shape());
      if (is_static) {
        for (double value : leaf.to_doubles()) out << "," << value;
      }
      out << ";";
    }
    out << "|";
  }
  return out.str();
}

const TracedFunction& ProgramCache::get(const std::string& signature,
                                        const std::function<TracedFunction()>& trace) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(signature);
    if (found != entries_.end()) {
      ++stats_.hits;
      return found->second;
    }
  }
  // Outside the lock: tracing and compiling may take long.
  const auto start = std::chrono::steady_clock::now();
  TracedFunction traced = trace();
  const auto traced_at = std::chrono::steady_clock::now();
  traced.executable = compile(traced.program);
  const auto compiled_at = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  stats_.last_trace_seconds = std::chrono::duration<double>(traced_at - start).count();
  stats_.last_compile_seconds = std::chrono::duration<double>(compiled_at - traced_at).count();
  stats_.compiled_equations = static_cast<int64_t>(traced.executable->program.equations.size());
  stats_.fused_equations = traced.executable->fused_equations;
  stats_.folded_transposes = traced.executable->folded_transposes;
  return entries_.emplace(signature, std::move(traced)).first->second;
}

CacheStats ProgramCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace pmap_engine::runtime
