// How pmap or shard_map lays one call's arguments and outputs over the devices: the mesh, each
// argument leaf's and output leaf's sharding and, for a mesh spanning several processes, this
// process's part of it. Mapped (pmap_engine/mapped.h) runs the call with it.
#pragma once

#include <optional>
#include <vector>

#include "pmap_engine/mapped.h"
#include "pmap_engine/mesh.h"
#include "runtime/mapped_call.h"

namespace pmap_engine {

class Mapped::Placement {
 public:
  struct Layout {
    Mesh mesh;
    runtime::InShardings in;
    runtime::OutShardings out;
    std::optional<runtime::ProcessSpan> span;  // none: every device is this process's
  };

  explicit Placement(runtime::MappedFunction function) : function_(std::move(function)) {}
  virtual ~Placement() = default;

  // Raises the transformation's error when `args` do not fit its specs.
  virtual Layout layout(const std::vector<Tree>& args) const = 0;

  const runtime::MappedFunction& function() const { return function_; }

 private:
  runtime::MappedFunction function_;
};

}  // namespace pmap_engine
