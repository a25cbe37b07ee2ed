#include "runtime/sharding_rules.h"

#include <set>
#include <string>

namespace pmap_engine::runtime {
namespace {

const Shape& shape_of(const ir::Program& program, int var) {
  return program.vars[static_cast<size_t>(var)].shape;
}

// Element-wise ops that the primitive table does not flag (the flag is loop fusion's, which
// needs f32 arithmetic): comparisons, selection, casts.
bool is_elementwise(const ir::Primitive& primitive) {
  static const std::set<std::string> names = {
      "eq", "ne", "lt", "le", "gt", "ge", "select_n", "convert_element_type", "stop_gradient",
      "logistic", "erfc", "cos", "sharding_constraint"};
  return primitive.elementwise || names.count(primitive.name) > 0;
}

std::vector<int> none(size_t rank) { return std::vector<int>(rank, -1); }

// Operands aligned with the output from the right; a dim of size 1 against a larger one is
// broadcast, and a rank-0 operand maps nowhere.
DimRule elementwise_rule(const ir::Equation& eq, const ir::Program& program) {
  DimRule rule;
  const Shape& out = shape_of(program, eq.outputs[0]);
  for (int var : eq.inputs) {
    const Shape& in = shape_of(program, var);
    std::vector<int> map = none(in.size());
    const size_t lead = out.size() - std::min(out.size(), in.size());
    for (size_t i = 0; i < in.size() && lead + i < out.size(); ++i) {
      if (in[i] == out[lead + i]) map[i] = static_cast<int>(lead + i);
    }
    rule.to_output.push_back(map);
    rule.contracted.push_back(none(in.size()));
  }
  return rule;
}

DimRule broadcast_rule(const ir::Equation& eq, const ir::Program& program) {
  const Shape& in = shape_of(program, eq.inputs[0]);
  const Shape& out = shape_of(program, eq.outputs[0]);
  const std::vector<int64_t>& dims = eq.params.ints("broadcast_dimensions");
  DimRule rule;
  std::vector<int> map = none(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == out[static_cast<size_t>(dims[i])]) map[i] = static_cast<int>(dims[i]);
  }
  rule.to_output = {map};
  rule.contracted = {none(in.size())};
  rule.shape_param = "shape";
  rule.propagates_forward = shape_num_elements(in) == shape_num_elements(out);
  return rule;
}

// Groups of dims with equal products (size-1 dims skipped); each group's major dims map.
DimRule reshape_rule(const ir::Equation& eq, const ir::Program& program) {
  const Shape& in = shape_of(program, eq.inputs[0]);
  const Shape& out = shape_of(program, eq.outputs[0]);
  std::vector<int> map = none(in.size());
  size_t i = 0, j = 0;
  while (true) {
    while (i < in.size() && in[i] == 1) ++i;
    while (j < out.size() && out[j] == 1) ++j;
    if (i == in.size() || j == out.size()) break;
    map[i] = static_cast<int>(j);
    int64_t in_product = in[i++], out_product = out[j++];
    while (in_product != out_product) {
      if (in_product < out_product) {
        if (i == in.size()) break;
        in_product *= in[i++];
      } else {
        if (j == out.size()) break;
        out_product *= out[j++];
      }
    }
  }
  DimRule rule;
  rule.to_output = {map};
  rule.contracted = {none(in.size())};
  rule.shape_param = "new_sizes";
  return rule;
}

DimRule transpose_rule(const ir::Equation& eq, const ir::Program& program) {
  const std::vector<int64_t>& permutation = eq.params.ints("permutation");
  std::vector<int> map = none(shape_of(program, eq.inputs[0]).size());
  for (size_t j = 0; j < permutation.size(); ++j) {
    map[static_cast<size_t>(permutation[j])] = static_cast<int>(j);
  }
  DimRule rule;
  rule.to_output = {map};
  rule.contracted = {none(map.size())};
  return rule;
}

DimRule reduce_rule(const ir::Equation& eq, const ir::Program& program, Combine combine) {
  const size_t rank = shape_of(program, eq.inputs[0]).size();
  const std::vector<int64_t>& axes = eq.params.ints("axes");
  const std::set<int64_t> reduced(axes.begin(), axes.end());
  std::vector<int> map = none(rank), contracted = none(rank);
  int next = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (reduced.count(static_cast<int64_t>(i))) {
      contracted[i] = static_cast<int>(i);
    } else {
      map[i] = next++;
    }
  }
  DimRule rule;
  rule.to_output = {map};
  rule.contracted = {contracted};
  rule.combine = combine;
  return rule;
}

// Output dims: batch, then lhs free, then rhs free (lax.py _dot_general_shape_computation).
DimRule dot_rule(const ir::Equation& eq, const ir::Program& program) {
  const size_t lhs_rank = shape_of(program, eq.inputs[0]).size();
  const size_t rhs_rank = shape_of(program, eq.inputs[1]).size();
  const auto& lhs_contracting = eq.params.ints("lhs_contracting");
  const auto& rhs_contracting = eq.params.ints("rhs_contracting");
  const auto& lhs_batch = eq.params.ints("lhs_batch");
  const auto& rhs_batch = eq.params.ints("rhs_batch");
  std::vector<int> lhs_map = none(lhs_rank), rhs_map = none(rhs_rank);
  std::vector<int> lhs_group = none(lhs_rank), rhs_group = none(rhs_rank);
  for (size_t b = 0; b < lhs_batch.size(); ++b) {
    lhs_map[static_cast<size_t>(lhs_batch[b])] = static_cast<int>(b);
    rhs_map[static_cast<size_t>(rhs_batch[b])] = static_cast<int>(b);
  }
  for (size_t c = 0; c < lhs_contracting.size(); ++c) {
    lhs_group[static_cast<size_t>(lhs_contracting[c])] = static_cast<int>(c);
    rhs_group[static_cast<size_t>(rhs_contracting[c])] = static_cast<int>(c);
  }
  int next = static_cast<int>(lhs_batch.size());
  for (size_t i = 0; i < lhs_rank; ++i) {
    if (lhs_map[i] < 0 && lhs_group[i] < 0) lhs_map[i] = next++;
  }
  for (size_t i = 0; i < rhs_rank; ++i) {
    if (rhs_map[i] < 0 && rhs_group[i] < 0) rhs_map[i] = next++;
  }
  DimRule rule;
  rule.to_output = {lhs_map, rhs_map};
  rule.contracted = {lhs_group, rhs_group};
  return rule;
}

// NHWC lhs, HWIO kernel (ops/conv.cpp): only the batch dim maps.
DimRule conv_rule(const ir::Equation& eq, const ir::Program& program) {
  std::vector<int> lhs_map = none(shape_of(program, eq.inputs[0]).size());
  lhs_map[0] = 0;
  DimRule rule;
  rule.to_output = {lhs_map, none(shape_of(program, eq.inputs[1]).size())};
  rule.contracted = {none(lhs_map.size()), none(shape_of(program, eq.inputs[1]).size())};
  return rule;
}

// The kernel's gradient sums over the batch of both the input and the output cotangent.
DimRule conv_kernel_gradient_rule(const ir::Equation& eq, const ir::Program& program) {
  std::vector<int> lhs_group = none(shape_of(program, eq.inputs[0]).size());
  std::vector<int> g_group = none(shape_of(program, eq.inputs[1]).size());
  lhs_group[0] = g_group[0] = 0;
  DimRule rule;
  rule.to_output = {none(lhs_group.size()), none(g_group.size())};
  rule.contracted = {lhs_group, g_group};
  return rule;
}

// take_along_axis(x, indices) and scatter_add(operand, indices, updates): every dim but `axis`
// lines up with the output's; the indexed dim stays whole.
DimRule indexed_rule(const ir::Equation& eq, const ir::Program& program) {
  const int64_t axis = eq.params.integer("axis");
  DimRule rule;
  for (int var : eq.inputs) {
    std::vector<int> map = none(shape_of(program, var).size());
    for (size_t i = 0; i < map.size(); ++i) {
      if (static_cast<int64_t>(i) != axis) map[i] = static_cast<int>(i);
    }
    rule.to_output.push_back(map);
    rule.contracted.push_back(none(map.size()));
  }
  return rule;
}

}  // namespace

std::optional<DimRule> dim_rule(const ir::Equation& eq, const ir::Program& program) {
  if (eq.outputs.size() != 1) return std::nullopt;
  const std::string& name = eq.primitive->name;
  if (is_elementwise(*eq.primitive)) return elementwise_rule(eq, program);
  if (name == "broadcast_in_dim") return broadcast_rule(eq, program);
  if (name == "reshape") return reshape_rule(eq, program);
  if (name == "transpose") return transpose_rule(eq, program);
  if (name == "reduce_sum") return reduce_rule(eq, program, Combine::kSum);
  if (name == "reduce_max") return reduce_rule(eq, program, Combine::kMax);
  if (name == "dot_general") return dot_rule(eq, program);
  if (name == "conv_general_dilated") return conv_rule(eq, program);
  if (name == "conv_general_dilated_transpose_rhs") return conv_kernel_gradient_rule(eq, program);
  if (name == "take_along_axis" || name == "scatter_add") return indexed_rule(eq, program);
  return std::nullopt;
}

bool carries(int64_t factor, int64_t from_size, int64_t to_size) {
  return from_size % factor == 0 && to_size % factor == 0;
}

}  // namespace pmap_engine::runtime
