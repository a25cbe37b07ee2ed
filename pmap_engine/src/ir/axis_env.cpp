#include "ir/axis_env.h"

#include <sstream>

#include "pmap_engine/dtype.h"

namespace pmap_engine::ir {
namespace {
thread_local std::vector<AxisFrame> bound_axes;
}

ScopedAxis::ScopedAxis(std::string name, int64_t size) {
  bound_axes.push_back({std::move(name), size});
}
ScopedAxis::~ScopedAxis() { bound_axes.pop_back(); }

std::vector<std::string> bound_axis_names() {
  std::vector<std::string> names;
  for (const auto& frame : bound_axes) names.push_back(frame.name);
  return names;
}

const AxisFrame& find_axis(const std::string& name, const char* op) {
  for (auto it = bound_axes.rbegin(); it != bound_axes.rend(); ++it) {
    if (it->name == name) return *it;
  }
  // JAX (jax/_src/core.py, axis lookup): NameError("unbound axis name: {name}. The following
  // axis names (e.g. defined by pmap) are available to collective operations: {names}").
  std::ostringstream names;
  names << "[";
  for (size_t i = 0; i < bound_axes.size(); ++i) {
    names << (i ? ", " : "") << "'" << bound_axes[i].name << "'";
  }
  names << "]";
  throw EngineError(std::string(op) + ": unbound axis name: " + name +
                    ". The following axis names (e.g. defined by pmap) are available to "
                    "collective operations: " +
                    names.str() +
                    ". Use the axis_name given to pmap (pitfall P1: pmap(axis_name='batch') "
                    "with psum(..., axis_name='devices') is this error).");
}

}  // namespace pmap_engine::ir
