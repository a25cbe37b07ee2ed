// The SPMD partitioner: a jit's global program, with every value's sharding decided
// (runtime/sharding_propagation.h), rewritten as the one program each device runs on its
// blocks, as XLA's SpmdPartitioner rewrites HLO (xla/service/spmd/spmd_partitioner.cc).
//
// Each equation runs on blocks. Before it, an operand whose layout is not the one the equation
// needs is resharded: the axes it must lose are all-gathered (tiled, innermost axis first), the
// axes it must gain are cut with dynamic_slice at axis_index * block (XLA cuts with
// partition-id). After it, a result summed over split dims (dot_general's contracting dims, a
// reduction's axes) is a partial sum: it is reduce-scattered (psum_scatter) along an output dim
// that is split over the same axis, all-reduced (psum, pmax) otherwise, as the partitioner's
// dot and reduce handlers do. Equations without a dimension rule (random bits, iota, windowed
// ops) run on whole operands, gathered first, and their results are cut to their sharding.
//
// The result is the program FSDP / ZeRO-3 users see in XLA's dumps: data parallel (batch split,
// parameters replicated) all-reduces each gradient; parameters split on their leading dim are
// all-gathered before each matmul and their gradients reduce-scattered.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"
#include "pmap_engine/mesh.h"
#include "pmap_engine/transforms.h"
#include "runtime/value_sharding.h"

namespace pmap_engine::runtime {

struct ShardedProgram {
  Mesh mesh;
  ir::Program program;  // the global program jit traced
  Tree output;          // its result's structure
  std::set<size_t> static_argnums;
  std::vector<ValueSharding> shardings;         // per variable, after propagation
  std::vector<ValueSharding> output_shardings;  // per output: out_shardings, else propagated
};

// The function each device runs, to be traced under a mapped call over `program.mesh`
// (runtime/mapped_call.h): it takes the arguments' blocks and returns the outputs' blocks.
TreeFunction partitioned_function(std::shared_ptr<const ShardedProgram> program);

}  // namespace pmap_engine::runtime
