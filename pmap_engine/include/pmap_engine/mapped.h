// What pmap and shard_map return: the function mapped over devices, called like the original
// on whole arguments. Both transformations run it through the same mapped call
// (runtime/mapped_call.h) and differ only in how they lay a call's arguments and outputs over
// the devices, their Placement (runtime/mapped_placement.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pmap_engine/transforms.h"
#include "pmap_engine/tree.h"

namespace pmap_engine {

struct MappedExecutionStats {
  int64_t peak_bytes_per_device = 0;  // exact, from the planner (the same on every device)
  int64_t peak_footprint_bytes_per_device = 0;  // live buffers and dead storage kept for reuse
  int64_t num_ops = 0;
  int64_t num_collectives = 0;
  int64_t donated_reuses = 0;  // summed over devices
};

class Mapped {
 public:
  Tree operator()(const std::vector<Tree>& args) const;

  CacheStats cache_stats() const;
  MappedExecutionStats last_execution() const;
  // The per-device program traced for these arguments, with its collectives.
  std::string program_text(const std::vector<Tree>& args) const;

  class Placement;

 protected:
  explicit Mapped(std::shared_ptr<const Placement> placement);

 private:
  std::shared_ptr<const Placement> placement_;
};

}  // namespace pmap_engine
