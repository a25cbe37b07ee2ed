// Sharding propagation: every value of a jit's global program gets a sharding from the ones the
// user gave (in_shardings, out_shardings, with_sharding_constraint), as XLA's
// ShardingPropagation pass does before the SPMD partitioner runs
// (xla/service/sharding_propagation.cc).
//
// The pass, on the dimension tables of runtime/sharding_rules.h:
//   - Forward, each equation's output takes its operands' splits on the dims they map to. When
//     operands disagree, the one cut into more blocks wins (GSPMD prefers the sharding with
//     more tiles; ties go to the first operand), and a mesh axis splits at most one dim.
//   - Backward, an operand nobody has sharded yet takes the splits of its output's dims.
//   - Repeated until nothing changes. Then a broadcast that adds elements and whose users left
//     it free takes its operand's splits too, and the rest is repeated again (Shardy
//     propagates forward through a broadcast last, op_priority_propagation.cc). A value still
//     unsharded is replicated.
// Only splits propagate: a replicated operand proposes nothing, so a value reached both from a
// replicated parameter and from a split batch ends up split. A dim whose size does not divide
// by its axes' size is never proposed (XLA pads such dims instead; the engine keeps them whole,
// which changes per-device memory and not values).
#pragma once

#include <optional>
#include <vector>

#include "ir/program.h"
#include "pmap_engine/mesh.h"
#include "runtime/value_sharding.h"

namespace pmap_engine::runtime {

// `fixed`, per variable: the shardings the user imposed (nullopt where free). Returns one
// sharding per variable of `program`.
std::vector<ValueSharding> propagate_shardings(
    const ir::Program& program, const Mesh& mesh,
    const std::vector<std::optional<ValueSharding>>& fixed);

}  // namespace pmap_engine::runtime
