#include "ir/varying_axes.h"

#include <algorithm>

#include "ir/axis_env.h"
#include "ir/trace.h"

namespace pmap_engine::ir {
namespace {

bool contains(const VaryingAxes& axes, const std::string& name) {
  return std::find(axes.begin(), axes.end(), name) != axes.end();
}

// The bound axes that `keep` accepts, in binding order, each once.
template <typename Keep>
VaryingAxes in_binding_order(Keep keep) {
  VaryingAxes ordered;
  for (const AxisFrame& frame : bound_axes()) {
    if (keep(frame.name) && !contains(ordered, frame.name)) ordered.push_back(frame.name);
  }
  return ordered;
}

}  // namespace

bool checking_vma() { return !bound_axes().empty() && bound_axes().back().check_vma; }

VaryingAxes with_axes(const VaryingAxes& axes, const VaryingAxes& more) {
  return in_binding_order(
      [&](const std::string& name) { return contains(axes, name) || contains(more, name); });
}

VaryingAxes without_axes(const VaryingAxes& axes, const VaryingAxes& fewer) {
  return in_binding_order(
      [&](const std::string& name) { return contains(axes, name) && !contains(fewer, name); });
}

std::string axes_tuple_text(const VaryingAxes& axes) {
  std::string text = "(";
  for (size_t i = 0; i < axes.size(); ++i) text += (i ? ", '" : "'") + axes[i] + "'";
  return text + (axes.size() == 1 ? ",)" : ")");
}

VaryingAxes axes_in_tuple(const std::string& text) {
  VaryingAxes axes;
  for (size_t open = text.find('\''); open != std::string::npos;) {
    const size_t close = text.find('\'', open + 1);
    axes.push_back(text.substr(open + 1, close - open - 1));
    open = text.find('\'', close + 1);
  }
  return axes;
}

VaryingAxes output_varying(const Primitive& primitive, const Params& params,
                           const std::vector<VaryingAxes>& inputs) {
  VaryingAxes axes;
  for (const VaryingAxes& input : inputs) axes = with_axes(axes, input);
  const std::string& name = primitive.name;
  if (name == "pvary") return with_axes(axes, axes_in_tuple(params.text("axes")));
  if (!primitive.collective_kernel) return axes;
  const VaryingAxes axis = {params.text("axis_name")};
  if (name == "psum_invariant" || name == "pmax" || name == "pmin") {
    return without_axes(axes, axis);
  }
  return with_axes(axes, axis);  // all_gather, reduce_scatter, ppermute, axis_index
}

std::vector<Array> insert_pvary(const Primitive& primitive, const Params& params,
                                std::vector<Array> inputs) {
  if (!checking_vma() || primitive.name == "pvary") return inputs;
  VaryingAxes target;
  if (primitive.collective_kernel) {
    target = {params.text("axis_name")};
  } else {
    for (const Array& input : inputs) target = with_axes(target, TraceContext::varying_of(input));
  }
  for (Array& input : inputs) input = vary(input, target);
  return inputs;
}

Array vary(const Array& value, const VaryingAxes& axes) {
  const VaryingAxes missing = without_axes(axes, TraceContext::varying_of(value));
  if (missing.empty()) return value;
  return bind1(find_primitive("pvary"), {value}, {{"axes", axes_tuple_text(missing)}});
}

}  // namespace pmap_engine::ir
