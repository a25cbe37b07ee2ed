#include "ir/varying_axes.h"

namespace pmap_engine::ir {

std::vector<uint64_t> infer_varying_axes(
    const Program& program, const std::vector<uint64_t>& input_axes,
    const std::function<uint64_t(const std::string&)>& axis_bit) {
  std::vector<uint64_t> varying(program.vars.size(), 0);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    varying[static_cast<size_t>(program.inputs[i])] = input_axes.at(i);
  }
  for (const Equation& equation : program.equations) {
    uint64_t axes = 0;
    for (int var : equation.inputs) axes |= varying[static_cast<size_t>(var)];
    const std::string& name = equation.primitive->name;
    if (equation.primitive->collective_kernel) {
      const uint64_t bit = axis_bit(equation.params.text("axis_name"));
      if (name == "psum" || name == "pmax" || name == "pmin") {
        axes &= ~bit;
      } else {  // all_gather, reduce_scatter, ppermute, axis_index
        axes |= bit;
      }
    }
    for (int var : equation.outputs) varying[static_cast<size_t>(var)] = axes;
  }
  return varying;
}

}  // namespace pmap_engine::ir
