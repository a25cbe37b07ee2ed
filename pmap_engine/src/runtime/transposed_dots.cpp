#include "runtime/transposed_dots.h"

#include <algorithm>
#include <vector>

namespace pmap_engine::runtime {
namespace {

bool is_matrix_product(const ir::Program& program, const ir::Equation& equation) {
  if (equation.primitive->name != "dot_general" || equation.inputs.size() != 2) return false;
  for (int var : equation.inputs) {
    if (program.vars[static_cast<size_t>(var)].shape.size() != 2) return false;
  }
  const ir::Params& params = equation.params;
  return params.ints("lhs_batch").empty() && params.ints("rhs_batch").empty() &&
         params.ints("lhs_contracting").size() == 1 && params.ints("rhs_contracting").size() == 1;
}

bool is_matrix_transpose(const ir::Equation& equation) {
  return equation.primitive->name == "transpose" &&
         equation.params.ints("permutation") == std::vector<int64_t>{1, 0};
}

}  // namespace

void fold_transposed_dots(Executable& executable) {
  ir::Program& program = executable.program;
  std::vector<int> readers(program.vars.size(), 0);
  std::vector<int> producer(program.vars.size(), -1);
  for (size_t e = 0; e < program.equations.size(); ++e) {
    for (int var : program.equations[e].inputs) ++readers[static_cast<size_t>(var)];
    for (int var : program.equations[e].outputs) producer[static_cast<size_t>(var)] = static_cast<int>(e);
  }
  for (int var : program.outputs) ++readers[static_cast<size_t>(var)];

  std::vector<bool> folded(program.equations.size(), false);
  for (ir::Equation& transpose : program.equations) {
    if (!is_matrix_transpose(transpose)) continue;
    const int product = transpose.inputs[0];
    const int p = producer[static_cast<size_t>(product)];
    if (p < 0 || readers[static_cast<size_t>(product)] != 1) continue;
    ir::Equation& dot = program.equations[static_cast<size_t>(p)];
    if (!is_matrix_product(program, dot)) continue;
    // dot(b, a) with each operand's contracting dimension: out[j, i] = sum_k a[i, k] b[k, j].
    std::swap(dot.inputs[0], dot.inputs[1]);
    const std::vector<int64_t> lhs_contracting = dot.params.ints("lhs_contracting");
    dot.params.set("lhs_contracting", dot.params.ints("rhs_contracting"));
    dot.params.set("rhs_contracting", lhs_contracting);
    dot.outputs = transpose.outputs;
    folded[static_cast<size_t>(&transpose - program.equations.data())] = true;
    ++executable.folded_transposes;
  }
  std::vector<ir::Equation> kept;
  for (size_t e = 0; e < program.equations.size(); ++e) {
    if (!folded[e]) kept.push_back(std::move(program.equations[e]));
  }
  program.equations = std::move(kept);
}

}  // namespace pmap_engine::runtime
