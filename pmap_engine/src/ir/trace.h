// TraceContext: records the ops applied to tracers into a Program. Contexts nest (a
// value_and_grad inside a jit); a thread keeps a stack of the active ones.
#pragma once

#include <map>
#include <vector>

#include "ir/program.h"

namespace pmap_engine::ir {

class TraceContext {
 public:
  TraceContext();   // pushes itself on this thread's stack
  ~TraceContext();  // pops itself
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  // A new argument tracer, varying along `varying` (ir/varying_axes.h).
  Array new_input(DType dtype, const Shape& shape, VaryingAxes varying = {});
  // This context's variable for `value`: its own tracer as is; a concrete array becomes a
  // constant; a tracer of an enclosing context becomes a captured value.
  int var_for(const Array& value);
  // Records one equation; returns its output tracers, typed by ir/varying_axes.h's rules under
  // shard_map(check_vma=True).
  std::vector<Array> record(const Primitive& primitive, const std::vector<Array>& inputs,
                            const Params& params, const std::vector<AbstractValue>& outputs);
  // Marks the outputs and returns the finished program. `captured_values` receives the
  // outer arrays the program's captured inputs stand for, in order.
  Program finish(const std::vector<Array>& outputs, std::vector<Array>* captured_values);

  int depth() const { return depth_; }

  // The mesh axes `value` varies along: its trace's type for a tracer, none for a concrete array.
  // A copy, not a reference into the trace's variable table: binding the next primitive grows
  // that table, so a reference held across a bind (as in `vary(full(...), varying_of(x))`,
  // whose arguments evaluate in either order) would dangle.
  static VaryingAxes varying_of(const Array& value);

  // The innermost active context, or nullptr.
  static TraceContext* current();

 private:
  Program program_;
  std::map<const void*, int> constant_vars_;
  std::map<std::pair<TraceContext*, int>, int> captured_vars_;
  std::vector<Array> captured_values_;
  int depth_ = 0;
};

}  // namespace pmap_engine::ir
