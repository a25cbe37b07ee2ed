#include "ir/axis_env.h"

#include <sstream>

#include "pmap_engine/dtype.h"
#include "pmap_engine/jax_release.h"

namespace pmap_engine::ir {
namespace {
thread_local std::vector<AxisFrame> frames;
}

const std::vector<AxisFrame>& bound_axes() { return frames; }

ScopedAxis::ScopedAxis(std::string name, int64_t size, bool check_vma) {
  frames.push_back({std::move(name), size, check_vma});
}
ScopedAxis::~ScopedAxis() { frames.pop_back(); }

std::vector<std::string> bound_axis_names() {
  std::vector<std::string> names;
  for (const auto& frame : frames) names.push_back(frame.name);
  return names;
}

namespace {

// JAX's NameError for an axis no enclosing map binds, as the op's path raises it.
//
// jax-v0.4.38: every collective's abstract eval calls jax/_src/lax/parallel.py
// _check_axis_names, and axis_size / all_gather / psum_scatter read the size through
// jax/_src/core.py AxisEnv.axis_size; both raise NameError(f"unbound axis name: {name}").
//
// jax-v0.11.0: jax/_src/lax/parallel.py _check_axis_names(axes, api_name) raises
// f"Found an unbound axis name: {name}. To fix this, please call {api_name} under
// `jax.shard_map`." with the api_name its caller passes. Under pmap (check_vma=False) psum and
// pmean bind psum_p (_allreduce_effectful_abstract_eval, 'psum'), and so do pmax and pmin
// (_pmin_pmax_abstract_eval falls back to it); ppermute's is _raise_to_shaped_abstract_eval
// ('ppermute'), axis_index's _axis_index_effectful_abstract_eval ('axis_index'). axis_size,
// all_gather (_all_gather) and psum_scatter (_psum_scatter) first take the size with
// _axis_size, psum(1, axis), whose constant case reads jax/_src/core.py AxisEnv.axis_size: the
// bare text, as at 0.4.38. (Under shard_map with check_vma=True JAX inserts a pvary first for
// pmax, pmin and ppermute, which names 'pvary'; that path is not told apart here.)
std::string unbound_axis_text(const std::string& name, const std::string& op) {
  if (jax_release() == JaxRelease::kV0_4_38) return "unbound axis name: " + name;
  std::string api_name;
  if (op == "psum" || op == "pmean" || op == "pmax" || op == "pmin") api_name = "psum";
  if (op == "ppermute" || op == "axis_index") api_name = op;
  if (api_name.empty()) return "unbound axis name: " + name;
  return "Found an unbound axis name: " + name + ". To fix this, please call " + api_name +
         " under `jax.shard_map`.";
}

}  // namespace

const AxisFrame& find_axis(const std::string& name, const char* op) {
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (it->name == name) return *it;
  }
  // JAX's text as it stands, then the engine's own note in parentheses: the op that looked the
  // axis up, the names that are bound here, and the fix.
  std::ostringstream names;
  names << "[";
  for (size_t i = 0; i < frames.size(); ++i) {
    names << (i ? ", " : "") << "'" << frames[i].name << "'";
  }
  names << "]";
  throw EngineError(unbound_axis_text(name, op) + " (pmap_engine: raised by " + op +
                    "; the axis names bound here are " + names.str() +
                    "; use the axis_name given to pmap. Pitfall P1: pmap(axis_name='batch') "
                    "with psum(..., axis_name='devices') is this error.)");
}

}  // namespace pmap_engine::ir
