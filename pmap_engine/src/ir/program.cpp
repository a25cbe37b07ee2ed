#include "ir/program.h"

#include <cmath>
#include <sstream>

namespace pmap_engine::ir {
namespace {

// Variables print as a, b, ..., z, ba, bb, ... as in a jaxpr.
std::string var_name(int var) {
  std::string name;
  int value = var;
  do {
    name.insert(name.begin(), static_cast<char>('a' + value % 26));
    value /= 26;
  } while (value > 0);
  return name;
}

// JAX's str_short_aval (jax/_src/core.py, _vma_ur_str): "{V:x}", "{V:(x,y)}"; nothing when
// the value varies along no axis.
std::string varying_text(const VaryingAxes& axes) {
  if (axes.empty()) return "";
  std::string names;
  for (const auto& axis : axes) names += (names.empty() ? "" : ",") + axis;
  return "{V:" + (axes.size() == 1 ? names : "(" + names + ")") + "}";
}

std::string typed(const Program& program, int var) {
  const AbstractValue& type = program.vars[static_cast<size_t>(var)];
  return var_name(var) + ":" + type_to_string(type.dtype, type.shape) + varying_text(type.varying);
}

std::string join_typed(const Program& program, const std::vector<int>& vars) {
  std::ostringstream out;
  for (size_t i = 0; i < vars.size(); ++i) out << (i ? " " : "") << typed(program, vars[i]);
  return out.str();
}

// A 0-d constant prints inline as a literal, as a jaxpr does ("mul b 0.5:f32[]"); other
// variables by name.
std::string operand(const Program& program, int var) {
  for (size_t i = 0; i < program.constants.size(); ++i) {
    if (program.constants[i] != var || !program.vars[static_cast<size_t>(var)].shape.empty()) {
      continue;
    }
    const DType dtype = program.vars[static_cast<size_t>(var)].dtype;
    const double value = Array(program.constant_values[i]).item();
    std::ostringstream out;
    out << value;
    // Floats print with a point (2.0, not 2), as Python prints them in a jaxpr.
    if (is_floating(dtype) && std::isfinite(value) && value == std::floor(value)) out << ".0";
    out << ":" << type_to_string(dtype, {});
    return out.str();
  }
  return var_name(var);
}

std::string join_operands(const Program& program, const std::vector<int>& vars) {
  std::ostringstream out;
  for (size_t i = 0; i < vars.size(); ++i) out << (i ? " " : "") << operand(program, vars[i]);
  return out.str();
}

}  // namespace

int Program::add_var(DType dtype, Shape shape, VaryingAxes varying) {
  vars.push_back({dtype, std::move(shape), std::move(varying)});
  return static_cast<int>(vars.size()) - 1;
}

std::string Program::to_string() const {
  std::ostringstream out;
  std::vector<int> closed_over;
  for (int var : constants) {
    if (!vars[static_cast<size_t>(var)].shape.empty()) closed_over.push_back(var);
  }
  closed_over.insert(closed_over.end(), captured.begin(), captured.end());
  out << "{ lambda " << join_typed(*this, closed_over) << "; " << join_typed(*this, inputs)
      << ". let\n";
  for (const auto& equation : equations) {
    out << "    " << join_typed(*this, equation.outputs) << " = " << equation.primitive->name
        << equation.params.to_string() << " " << join_operands(*this, equation.inputs) << "\n";
  }
  out << "  in (" << join_operands(*this, outputs) << (outputs.size() == 1 ? ",)" : ")")
      << " }\n";
  return out.str();
}

}  // namespace pmap_engine::ir
