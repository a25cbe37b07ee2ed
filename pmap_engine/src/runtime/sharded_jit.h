// jit with shardings: the global program partitioned over the shardings' mesh and run there as
// one program per device (runtime/spmd_partitioner.h) on the mapped call pmap and shard_map
// use (runtime/mapped_call.h), so that arguments and results live as per-device blocks.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pmap_engine/transforms.h"
#include "runtime/mapped_call.h"
#include "runtime/program_cache.h"
#include "runtime/spmd_partitioner.h"

namespace pmap_engine::runtime {

struct JitShardings {
  std::vector<ShardingTree> in;                  // one per non-static argument
  std::optional<std::vector<ShardingTree>> out;  // one per top-level output, or one for all
  std::set<size_t> static_argnums;
  std::set<size_t> donate_argnums;
};

// One signature's partitioned program and the mapped call that runs it.
class ShardedCall {
 public:
  // `traced` is jit's program for `args`. Throws EngineError for shardings over different
  // meshes and for out_shardings that do not fit the outputs, in JAX's words.
  ShardedCall(const TracedFunction& traced, const std::vector<Tree>& args,
              const JitShardings& shardings, const std::string& name);

  Tree operator()(const std::vector<Tree>& args) const;
  ExecutionStats last_execution() const;
  // Every value's sharding, the per-device program with its collectives, and the per-device
  // bytes of the arguments and results.
  std::string text(const std::vector<Tree>& args) const;

 private:
  OutShardings out_shardings() const;

  std::shared_ptr<ShardedProgram> sharded_;
  InShardings in_;
  std::unique_ptr<MappedFunction> mapped_;
};

}  // namespace pmap_engine::runtime
