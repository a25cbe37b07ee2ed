#include "ir/trace.h"

#include <algorithm>

#include "ir/varying_axes.h"

namespace pmap_engine::ir {
namespace {
thread_local std::vector<TraceContext*> active_traces;
}

TraceContext::TraceContext() : depth_(static_cast<int>(active_traces.size())) {
  active_traces.push_back(this);
}

TraceContext::~TraceContext() {
  auto found = std::find(active_traces.begin(), active_traces.end(), this);
  if (found != active_traces.end()) active_traces.erase(found);
}

TraceContext* TraceContext::current() {
  return active_traces.empty() ? nullptr : active_traces.back();
}

Array TraceContext::new_input(DType dtype, const Shape& shape, VaryingAxes varying) {
  int var = program_.add_var(dtype, shape, std::move(varying));
  program_.inputs.push_back(var);
  return Array(this, var, dtype, shape);
}

int TraceContext::var_for(const Array& value) {
  if (value.trace() == this) return value.var();
  if (value.is_traced()) {
    TraceContext* owner = value.trace();
    if (std::find(active_traces.begin(), active_traces.end(), owner) == active_traces.end()) {
      throw EngineError(
          "Encountered an unexpected tracer " + type_to_string(value.dtype(), value.shape()) +
          ": a value traced inside a jit or value_and_grad was kept after that function "
          "returned (stored in a global or a captured variable). Return it from the function "
          "instead.");
    }
    auto key = std::make_pair(owner, value.var());
    auto found = captured_vars_.find(key);
    if (found != captured_vars_.end()) return found->second;
    int var = program_.add_var(value.dtype(), value.shape(), varying_of(value));
    program_.captured.push_back(var);
    captured_vars_.emplace(key, var);
    captured_values_.push_back(value);
    return var;
  }
  const Buffer& buffer = value.buffer();
  const void* identity = buffer.bytes.get();
  auto found = constant_vars_.find(identity);
  if (found != constant_vars_.end()) return found->second;
  int var = program_.add_var(value.dtype(), value.shape());
  program_.constants.push_back(var);
  program_.constant_values.push_back(buffer);
  constant_vars_.emplace(identity, var);
  return var;
}

std::vector<Array> TraceContext::record(const Primitive& primitive,
                                        const std::vector<Array>& inputs, const Params& params,
                                        const std::vector<AbstractValue>& outputs) {
  Equation equation;
  equation.primitive = &primitive;
  equation.params = params;
  std::vector<VaryingAxes> input_types;
  for (const auto& input : inputs) {
    equation.inputs.push_back(var_for(input));
    input_types.push_back(program_.vars[static_cast<size_t>(equation.inputs.back())].varying);
  }
  const VaryingAxes varying =
      checking_vma() ? output_varying(primitive, params, input_types) : VaryingAxes{};
  std::vector<Array> tracers;
  for (const auto& output : outputs) {
    int var = program_.add_var(output.dtype, output.shape, varying);
    equation.outputs.push_back(var);
    tracers.emplace_back(this, var, output.dtype, output.shape);
  }
  program_.equations.push_back(std::move(equation));
  return tracers;
}

VaryingAxes TraceContext::varying_of(const Array& value) {
  // A tracer of a finished trace has no type to read: var_for raises JAX's error for it.
  if (!value.is_traced() || std::find(active_traces.begin(), active_traces.end(), value.trace()) ==
                                active_traces.end()) {
    return {};
  }
  return value.trace()->program_.vars[static_cast<size_t>(value.var())].varying;
}

Program TraceContext::finish(const std::vector<Array>& outputs,
                             std::vector<Array>* captured_values) {
  for (const auto& output : outputs) program_.outputs.push_back(var_for(output));
  if (captured_values != nullptr) *captured_values = captured_values_;
  return std::move(program_);
}

}  // namespace pmap_engine::ir
