// Loop fusion, as XLA's CPU compiler fuses element-wise ops (xla/service/instruction_fusion.cc,
// loop fusion kind kLoop): a connected group of element-wise f32 equations of one shape runs as
// one loop over the data, block by block, instead of one pass over memory per op. As in XLA,
// a broadcast fuses into its consumers' loop, which reads the operand at the mapped index
// (xla/service/elemental_ir_emitter.cc: the kBroadcast case of MakeElementGenerator).
//
// Vocabulary:
//   fusible     an equation with one output of more than one element, f32 or pred (bool), that
//               is either a broadcast_in_dim, or has an F32Block (ir/primitive.h) and f32 or
//               pred inputs each of the output's shape, 0-d, or of its rank with size-1
//               dimensions that the op stretches (lax's broadcasting_shape_rule: a bias row
//               [1, N] against [B, N], a row statistic [B, T, 1] against [B, T, D]).
//   group       fusible equations of one output shape joined along producer -> consumer edges.
//               It runs where its last member stood in the program, so a group never takes in
//               an equation whose value an outside equation before that point reads. A lone
//               equation is a group worth a loop when it stretches an operand.
//   view        how a loop reads an operand smaller than itself: block by block through a
//               BroadcastRead (ops/broadcast_read.h), stride 0 along the broadcast dimensions,
//               never materialised. A broadcast_in_dim member is only that view of its operand
//               (BatchNorm's [C] -> [B, H, W, C], LayerNorm's [B, T] -> [B, T, D]); one that an
//               equation outside its group reads leaves the group and is materialised as before.
//   pred        a bool value (a comparison's result, select_n's predicate): 0 or 1 in f32 inside
//               the loop, converted where it enters or leaves.
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
