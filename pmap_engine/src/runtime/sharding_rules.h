// How an equation's operand dimensions correspond to its output's: the one table both sharding
// propagation (runtime/sharding_propagation.h) and the SPMD partitioner
// (runtime/spmd_partitioner.h) read, as XLA's propagation and partitioner share
// hlo_sharding_util's dimension mappings.
//
//   mapped      operand dim i is output dim j: a sharding of one is a sharding of the other.
//               A dim broadcast from size 1 maps nowhere (its one element serves every block).
//   contracted  dims summed away (dot_general's contracting dims, a reduction's axes, conv's
//               batch in the kernel's gradient). Dims of one group, one per operand, may stay
//               split when all carry the same axes: each device then computes a partial
//               result, which a collective over those axes completes (an all-reduce, or a
//               reduce-scatter where the output is split along the axis).
//
// Sources (XLA, xla/hlo/utils/hlo_sharding_util.cc and xla/service/spmd/*): element-wise ops
// keep the operands' tiling (ElementwiseHandler), broadcast maps operand dims to
// `dimensions` (HandleBroadcast), transpose permutes (TransposeSharding), reshape carries a
// tiled dim through a group of dims whose major dim divides (ReshapeSharding), reduce
// keeps the non-reduced dims and all-reduces partially reduced ones (HandleReduce), dot maps
// batch and free dims and contracts split contracting dims into a partial sum
// (dot_handler.cc PartitionDot), conv keeps the batch dim (convolution_handler.cc).
#pragma once

#include <optional>
#include <vector>

#include "ir/program.h"

namespace pmap_engine::runtime {

enum class Combine { kSum, kMax };

struct DimRule {
  std::vector<std::vector<int>> to_output;   // [operand][dim]: output dim, or -1
  std::vector<std::vector<int>> contracted;  // [operand][dim]: contraction group, or -1
  Combine combine = Combine::kSum;
  // The equation's "shape" / "new_sizes" param is its output shape: each device passes its
  // block's shape.
  const char* shape_param = nullptr;
  // Output dims may take a sharding from the operands during forward propagation. Off for a
  // broadcast that adds elements: its consumers decide, and only a broadcast they leave free
  // takes its operand's splits, in propagation's last phase (Shardy's op-priority schedule,
  // runtime/sharding_propagation.h).
  bool propagates_forward = true;
};

// The rule of a one-output equation of `program`, or nullopt for the equations partitioned by
// gathering their operands whole (random bits, iota, windows, anything with no rule here).
std::optional<DimRule> dim_rule(const ir::Equation& equation, const ir::Program& program);

// Whether a split of `factor` blocks on a dim of `from_size` elements carries to a dim of
// `to_size`: both divide (reshape's merged and split dims; equal sizes trivially).
bool carries(int64_t factor, int64_t from_size, int64_t to_size);

}  // namespace pmap_engine::runtime
