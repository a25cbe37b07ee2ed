// The mapped call that shard_map and pmap share: trace the per-device function once per
// signature with the mesh's axes bound, cut every argument into per-device blocks, run all
// devices (execute_mapped, whose collectives overlap compute), and assemble the outputs'
// blocks into global arrays.
// pmap is a one-axis mesh whose mapped dimensions are squeezed (runtime/sharding.h), as
// jax/_src/pmap.py implements pmap on shard_map.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pmap_engine/mesh.h"
#include "pmap_engine/mapped.h"
#include "runtime/executor.h"
#include "runtime/sharding.h"

namespace pmap_engine::runtime {

struct MappedFunctionOptions {
  std::string what;  // "pmap" or "shard_map", for messages
  std::set<size_t> static_argnums;
  std::set<size_t> donate_argnums;
  // Prove statically that outputs left unsplit along a mesh axis do not vary along it
  // (shard_map's check_vma); otherwise such outputs are compared bit for bit at run time.
  bool check_vma = false;
  // Outputs left unsplit along a mesh axis are the same on every device by construction (a
  // partitioned jit program, whose collectives make them so): no run-time comparison.
  bool replicated_by_construction = false;
  // pmap's debug check_replicated_outputs: top-level output positions.
  std::set<size_t> check_replicated_outputs;
};

// Per argument, per leaf (static arguments: none).
using InShardings = std::vector<std::vector<LeafSharding>>;
// Per output leaf, from the traced result's structure.
using OutShardings = std::function<std::vector<LeafSharding>(const Tree& output)>;

class MappedFunction {
 public:
  MappedFunction(TreeFunction function, MappedFunctionOptions options);

  // With a `span`, `mesh` is this process's devices on a one-axis mesh, and the axis spans
  // span->processes times as many devices: the program is traced with the global axis size
  // and its collectives reach every process (executor.h).
  Tree operator()(const Mesh& mesh, const std::vector<Tree>& args, const InShardings& in,
                  const OutShardings& out, const ProcessSpan* span = nullptr) const;
  std::string program_text(const Mesh& mesh, const std::vector<Tree>& args, const InShardings& in,
                           const OutShardings& out) const;
  // The per-device program itself, traced afresh (not cached).
  ir::Program traced_program(const Mesh& mesh, const std::vector<Tree>& args,
                             const InShardings& in, const OutShardings& out) const;
  CacheStats cache_stats() const;
  MappedExecutionStats last_execution() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace pmap_engine::runtime
