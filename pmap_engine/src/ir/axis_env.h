// The named axes bound by enclosing maps (pmap's axis_name) while a function is traced.
// Collectives look their axis up here; an axis name no map bound is JAX's "unbound axis name"
// error (pitfall P1), in the words of the release in effect (jax_release.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pmap_engine::ir {

struct AxisFrame {
  std::string name;
  int64_t size = 0;
  // Bound by shard_map with check_vma=True: values are typed with the axes they vary along,
  // which changes psum's transpose and adds pvary (ir/varying_axes.h).
  bool check_vma = false;
};

// Binds `name` with `size` for the lifetime of the object (on this thread).
class ScopedAxis {
 public:
  ScopedAxis(std::string name, int64_t size, bool check_vma = false);
  ~ScopedAxis();
  ScopedAxis(const ScopedAxis&) = delete;
  ScopedAxis& operator=(const ScopedAxis&) = delete;
};

// The innermost frame binding `name`; throws EngineError in JAX's words when none does
// ("Found an unbound axis name: X. To fix this, please call psum under `jax.shard_map`." at
// 0.11.0, "unbound axis name: X" at 0.4.38), then, as the engine's own note in parentheses, the
// op, the names bound here and the fix.
const AxisFrame& find_axis(const std::string& name, const char* op);
std::vector<std::string> bound_axis_names();
// Every frame bound on this thread, outermost first.
const std::vector<AxisFrame>& bound_axes();

}  // namespace pmap_engine::ir
