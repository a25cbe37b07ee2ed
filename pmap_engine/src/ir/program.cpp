#include "ir/program.h"

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

std::string typed(const Program& program, int var) {
  const AbstractValue& type = program.vars[static_cast<size_t>(var)];
  return var_name(var) + ":" + type_to_string(type.dtype, type.shape);
}

std::string join_typed(const Program& program, const std::vector<int>& vars) {
  std::ostringstream out;
  for (size_t i = 0; i < vars.size(); ++i) out << (i ? " " : "") << typed(program, vars[i]);
  return out.str();
}

std::string join_names(const std::vector<int>& vars) {
  std::ostringstream out;
  for (size_t i = 0; i < vars.size(); ++i) out << (i ? " " : "") << var_name(vars[i]);
  return out.str();
}

}  // namespace

int Program::add_var(DType dtype, Shape shape) {
  vars.push_back({dtype, std::move(shape)});
  return static_cast<int>(vars.size()) - 1;
}

std::string Program::to_string() const {
  std::ostringstream out;
  std::vector<int> closed_over = constants;
  closed_over.insert(closed_over.end(), captured.begin(), captured.end());
  out << "{ lambda " << join_typed(*this, closed_over) << "; " << join_typed(*this, inputs)
      << ". let\n";
  for (const auto& equation : equations) {
    out << "    " << join_typed(*this, equation.outputs) << " = " << equation.primitive->name
        << equation.params.to_string() << " " << join_names(equation.inputs) << "\n";
  }
  out << "  in (" << join_names(outputs) << (outputs.size() == 1 ? ",)" : ")") << " }\n";
  return out.str();
}

}  // namespace pmap_engine::ir
