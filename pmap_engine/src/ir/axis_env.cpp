#include "ir/axis_env.h"

#include <sstream>

#include "pmap_engine/dtype.h"

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

const AxisFrame& find_axis(const std::string& name, const char* op) {
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (it->name == name) return *it;
  }
  // JAX (jax/_src/core.py, axis lookup): NameError("unbound axis name: {name}. The following
  // axis names (e.g. defined by pmap) are available to collective operations: {names}").
  std::ostringstream names;
  names << "[";
  for (size_t i = 0; i < frames.size(); ++i) {
    names << (i ? ", " : "") << "'" << frames[i].name << "'";
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
