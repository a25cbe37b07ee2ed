#include "pmap_engine/mapped.h"

#include "runtime/mapped_placement.h"

namespace pmap_engine {

Mapped::Mapped(std::shared_ptr<const Placement> placement) : placement_(std::move(placement)) {}

Tree Mapped::operator()(const std::vector<Tree>& args) const {
  const Placement::Layout layout = placement_->layout(args);
  return placement_->function()(layout.mesh, args, layout.in, layout.out,
                                layout.span ? &*layout.span : nullptr);
}

CacheStats Mapped::cache_stats() const { return placement_->function().cache_stats(); }

MappedExecutionStats Mapped::last_execution() const {
  return placement_->function().last_execution();
}

std::string Mapped::program_text(const std::vector<Tree>& args) const {
  const Placement::Layout layout = placement_->layout(args);
  return placement_->function().program_text(layout.mesh, args, layout.in, layout.out);
}

}  // namespace pmap_engine
