// Program: a traced function as a list of equations over numbered variables, like a jaxpr.
#pragma once

#include <string>
#include <vector>

#include "ir/primitive.h"

namespace pmap_engine::ir {

struct Equation {
  const Primitive* primitive = nullptr;
  std::vector<int> inputs;
  std::vector<int> outputs;
  Params params;
};

struct Program {
  std::vector<AbstractValue> vars;  // indexed by variable number
  std::vector<int> inputs;          // the function's arguments, flattened
  std::vector<int> captured;        // values the function closed over (outer tracers)
  std::vector<int> constants;       // concrete arrays the function used (see constant_values)
  std::vector<Buffer> constant_values;
  std::vector<int> outputs;
  std::vector<Equation> equations;

  int add_var(DType dtype, Shape shape, VaryingAxes varying = {});
  size_t num_ops() const { return equations.size(); }

  // jaxpr-like text: one equation per line with its output types (with JAX's {V:x} for a
  // value varying along mesh axis x), params and inputs.
  std::string to_string() const;
};

}  // namespace pmap_engine::ir
