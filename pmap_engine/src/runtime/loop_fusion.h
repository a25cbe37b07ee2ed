// Loop fusion, as XLA's CPU compiler fuses element-wise ops (xla/service/instruction_fusion.cc,
// loop fusion kind kLoop): a connected group of element-wise f32 equations of one shape runs as
// one loop over the data, block by block, instead of one pass over memory per op.
//
// Vocabulary:
//   fusible     an equation whose primitive has an F32Block (ir/primitive.h), one f32 output of
//               more than one element, and f32 inputs each of the output's shape, of one element
//               (a broadcast scalar, such as a literal), or of the output's trailing dimensions
//               with ones before them (a bias row [1, N] added to [B, N]).
//   group       fusible equations of one output shape joined along producer -> consumer edges.
//               It runs where its last member stood in the program, so a group never takes in
//               an equation whose value an outside equation before that point reads.
//   materialised  a member's value that something outside the group reads (or a program
//               output); the other members' values live only in a block-sized scratch row.
//
// Each op still rounds to f32 after every operation, in the program's order, and no multiply
// and add are contracted: a fused loop computes bit for bit what the unfused ops compute
// (loop_fusion_test checks it on the train steps). XLA differs there only where its own
// algebraic simplifier rewrites the graph, which the engine does not model.
#pragma once

#include "runtime/compile.h"

namespace pmap_engine::runtime {

// Replaces each group of `executable.program` by one equation of a "fusion" primitive that
// `executable` owns.
void fuse_elementwise_loops(Executable& executable);

}  // namespace pmap_engine::runtime
