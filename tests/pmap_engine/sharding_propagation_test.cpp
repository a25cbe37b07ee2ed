// Sharding propagation and SPMD partitioning, one test per propagation rule of
// runtime/sharding_rules.cpp: the sharding each value gets (read from
// Jitted::partitioned_program_text, which prints every value's spec and block), the collectives
// in the per-device program, and the values against the unsharded jit: the same bits where no
// sum is split, within a derived bound where one is. Then the errors jit raises for bad
// shardings, in JAX's words.
//
// The reference is what jax-v0.11.0 does with an Auto mesh (the NamedSharding repr's
// axis_types=(Auto,)): it lowers to Shardy (jax/_src/config.py jax_use_shardy_partitioner,
// default True), whose propagation picks the shardings; XLA's SPMD partitioner then rewrites
// the program per device. Shardy sources are openxla/shardy at ef6e9bd (2026-07-15, the day
// before jax-v0.11.0), under shardy/dialect/sdy/transforms/propagation/: the per-op factor
// rules of op_sharding_rule_registry.cc createOpShardingRule, the projection of dim shardings
// onto factors of sharding_projection.cc, the op-priority schedule of
// op_priority_propagation.cc. XLA sources are under xla/service/spmd/.
//
// Where the engine differs from JAX (XLA pads an uneven dim that the engine keeps whole;
// Shardy splits a mesh axis into sub-axes across a reshape, "data":(1)2; XLA completes a sum
// over two mesh axes with one all-reduce where the engine issues one per axis), the tests
// assert only what the two share.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "engine_test_util.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using testing::column_magnitudes;
using testing::expect_same_bits;
using testing::expect_within_summation_bound;
using ::testing::HasSubstr;
using testing::normal_array;
using testing::product_magnitudes;
using ::testing::Not;
using ::testing::StartsWith;

const Mesh& mesh() {
  static const Mesh mesh(DeviceSet(4), {{"data", 4}});
  return mesh;
}
// Device 2i + j at (x=i, y=j), row-major (pmap_engine/mesh.h).
const Mesh& grid() {
  static const Mesh mesh(DeviceSet(4), {{"x", 2}, {"y", 2}});
  return mesh;
}
NamedSharding on(PartitionSpec spec) { return NamedSharding(mesh(), std::move(spec)); }
NamedSharding on_grid(PartitionSpec spec) { return NamedSharding(grid(), std::move(spec)); }

const PartitionSpec kData{{"data"}};
const PartitionSpec kReplicated{};

using Counts = std::map<std::string, int>;

// partitioned_program_text's sections.
struct Dump {
  std::string shardings;  // every value of the global program: type, spec, block
  std::string program;    // the per-device program
  Counts collectives;     // per kind: "all-reduce", "all-gather", "reduce-scatter", ...
  std::string collective_lines;
};

Dump dump_of(const Jitted& f, const std::vector<Tree>& args) {
  const std::string text = f.partitioned_program_text(args);
  const size_t program = text.find("# The program each device runs");
  const size_t collectives = text.find("# Collectives the partitioner inserted");
  const size_t memory = text.find("# Memory per device");
  EXPECT_NE(program, std::string::npos);
  EXPECT_NE(collectives, std::string::npos);
  EXPECT_NE(memory, std::string::npos);
  Dump dump{text.substr(0, program),
            text.substr(program, collectives - program),
            {},
            text.substr(collectives, memory - collectives)};
  std::istringstream lines(dump.collective_lines);
  std::string line;
  std::getline(lines, line);  // the heading
  while (std::getline(lines, line)) {
    // "  all-gather  f32[3,16] -> f32[12,16]  [...]"; "  total ...", "  none" are summaries.
    if (line.rfind("  ", 0) != 0 || line.rfind("  total ", 0) == 0 || line == "  none") continue;
    ++dump.collectives[line.substr(2, line.find("  ", 2) - 2)];
  }
  return dump;
}

Jitted sharded(TreeFunction f, std::vector<NamedSharding> in,
               std::optional<std::vector<ShardingTree>> out = std::nullopt) {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>(in.begin(), in.end());
  options.out_shardings = std::move(out);
  return jit(std::move(f), options, "f");
}

Tree unsharded(const TreeFunction& f, const std::vector<Tree>& args) { return jit(f)(args); }

const Array& arg(const std::vector<Tree>& args, size_t i) { return args[i].leaf(); }

// ---------------------------------------------------------------------------------------------
// Element-wise ops. Shardy gives every pointwise op one factor per dim shared by operands and
// result (op_sharding_rule_registry.cc createOpShardingRule: AddOp, MulOp, ... ->
// OpShardingRuleBuilder::buildPointwise), so the result takes the split operand's sharding.
// A size-1 dim that broadcasting expands has its own factor of size 1 (the BroadcastInDimOp
// case: builder.addFactor(inDim, kNullDim, 1)) and a scalar cannot be sharded (isScalar in
// op_priority_propagation.cc): neither operand holds any share of the split, so each device
// uses all of it, with no collective (xla/service/spmd/spmd_partitioner.cc
// SpmdPartitioningVisitor::HandleElementwise reshards operands to the result's sharding; a
// replicated operand is sliced locally).
TEST(ShardingPropagation, ElementwiseResultTakesTheSplitOperandsSharding) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(arg(a, 0) * arg(a, 1) + arg(a, 2) + 2.0);  // [8,6] * [1,6] + [6] + scalar
  };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 1)), Tree(normal_array({1, 6}, 2)),
                                  Tree(normal_array({6}, 3))};
  const Jitted jitted = sharded(f, {on(kData), on(kReplicated), on(kReplicated)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings, HasSubstr("  mul  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_THAT(dump.shardings, HasSubstr("  add  f32[8,6]  P('data',)  block [2,6]\n"
                                        "  add  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_THAT(dump.shardings, HasSubstr("  output 0  f32[8,6]  P('data',)\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_same_bits(jitted(args), unsharded(f, args));
}

// broadcast_in_dim. Its new dims have no operand dim to take a sharding from: they take their
// users' (Shardy's BroadcastInDimOp rule gives a new dim a factor of the result alone, which
// propagation fills from the multiply's pass-through rule backward). Forward, Shardy's
// op-priority schedule propagates a broadcast's operand sharding only at its last priority
// (op_priority_propagation.cc opPropagationSchedule: propagateAnyExceptBroadcastForward, then
// propagateAny), so a broadcast that no user shards still gets its operand's split, and
// XLA's HandleBroadcast (spmd_partitioner.cc) broadcasts each device's block locally.
TEST(ShardingPropagation, BroadcastInDimNewDimsTakeTheirConsumersSharding) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    // v [6] becomes the rows of an [8,6] value that multiplies x, split on its rows.
    return Tree(arg(a, 0) * broadcast_in_dim(arg(a, 1), {8, 6}, {1}));
  };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 4)), Tree(normal_array({6}, 5))};
  const Jitted jitted = sharded(f, {on(kData), on(kReplicated)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  broadcast_in_dim  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_same_bits(jitted(args), unsharded(f, args));

  // No user: the broadcast takes the operand's split on the dim it maps to, and each device
  // broadcasts its [2] block to [2,6] without gathering v.
  const TreeFunction g = [](const std::vector<Tree>& a) {
    return Tree(broadcast_in_dim(arg(a, 0), {8, 6}, {0}));
  };
  const std::vector<Tree> g_args = {Tree(normal_array({8}, 6))};
  const Jitted g_jitted = sharded(g, {on(kData)});
  const Dump g_dump = dump_of(g_jitted, g_args);
  EXPECT_THAT(g_dump.shardings,
              HasSubstr("  broadcast_in_dim  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_EQ(g_dump.collectives, Counts{});
  expect_same_bits(g_jitted(g_args), unsharded(g, g_args));
}

// reshape. Shardy's ReshapeOp rule decomposes dims into factors: [8,6] -> [48] is
// (i, j) -> ((i j)) with i = 8, j = 6 (Shardy's docs/propagation.md, "Compound factors"). A
// split dim's axes go to its major factor when their size divides it (sharding_projection.cc
// ShardingProjection::build: the gcd loop for a non-minor-most factor): 'data' (4) divides
// i = 8, so the split carries through a merge and through the reverse split. Device d's block
// is rows 2d, 2d+1 = elements 12d .. 12d+11: a reshape of blocks, no collective.
TEST(ShardingPropagation, ReshapeCarriesASplitMajorDimThroughMergeAndSplit) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree::tuple({Tree(reshape(arg(a, 0), {48})), Tree(reshape(arg(a, 1), {8, 6}))});
  };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 7)), Tree(normal_array({48}, 8))};
  const Jitted jitted = sharded(f, {on(kData), on(kData)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  reshape  f32[48]  P('data',)  block [12]\n"));
  EXPECT_THAT(dump.shardings,
              HasSubstr("  reshape  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_same_bits(jitted(args), unsharded(f, args));
}

// reshape where the split cannot carry, so the result is replicated and the operand gathered:
//  - [12] -> [3,4]: 'data' (4) and the major factor 3 are coprime; ShardingProjection::build
//    puts the axis in overflowAxes and closes the later factors, so nothing reaches the
//    result;
//  - [2,8] P(None, 'data') -> [16]: the result's dim is (i j) with only the minor factor j
//    split, and TensorFactorShardings::createTensorShardingAttr stops at the unsplit major
//    factor i ("Any subsequent factor will require strided view").
// XLA's partitioner then reshards each operand to replicated: an all-gather
// (spmd_partitioner.cc HandleReshape: a replicated result takes DefaultAction, which
// replicates the operand).
TEST(ShardingPropagation, ReshapeThatCannotCarryASplitGathersAndReplicates) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree::tuple({Tree(reshape(arg(a, 0), {3, 4})), Tree(reshape(arg(a, 1), {16}))});
  };
  const std::vector<Tree> args = {Tree(normal_array({12}, 9)), Tree(normal_array({2, 8}, 10))};
  const Jitted jitted = sharded(f, {on(kData), on(PartitionSpec{{}, {"data"}})});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings, HasSubstr("  reshape  f32[3,4]  P()  block [3,4]\n"));
  EXPECT_THAT(dump.shardings, HasSubstr("  reshape  f32[16]  P()  block [16]\n"));
  EXPECT_EQ(dump.collectives, (Counts{{"all-gather", 2}}));
  expect_same_bits(jitted(args), unsharded(f, args));
}

// transpose permutes the splits with its dims (Shardy's TransposeOp rule: one factor per dim,
// permuted; XLA hlo_sharding_util::TransposeSharding), no collective.
TEST(ShardingPropagation, TransposePermutesTheSplits) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(transpose(arg(a, 0))); };
  const std::vector<Tree> args = {Tree(normal_array({8, 12}, 11))};
  const Jitted jitted = sharded(f, {on(kData)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  transpose  f32[12,8]  P(None, 'data')  block [12,2]\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_same_bits(jitted(args), unsharded(f, args));
}

// reduce_sum over the split dim. Shardy's ReduceOp rule makes a reduced dim a reduction factor
// the result lacks, so the result holds no 'data' (replicated), and XLA's HandleReduce
// (spmd_partitioner.cc) reduces each block and all-reduces the partial sums. JAX's docs
// (docs/parallel.md, "Explicit sharding mode") show it: x.sum(0) of a sharded x compiles to
// 'all-reduce('. Each column sums 8 terms in another order: within the summation bound.
TEST(ShardingPropagation, ReduceSumOverASplitDimIsAllReducedAndReplicated) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(sum(arg(a, 0), {0})); };
  const Array x = normal_array({8, 6}, 12);
  const std::vector<Tree> args = {Tree(x)};
  const Jitted jitted = sharded(f, {on(kData)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings, HasSubstr("  reduce_sum  f32[6]  P()  block [6]\n"));
  EXPECT_THAT(dump.program, HasSubstr("psum[axes=('data',)"));
  EXPECT_EQ(dump.collectives, (Counts{{"all-reduce", 1}}));
  expect_within_summation_bound(jitted(args).leaf(), unsharded(f, args).leaf(),
                                column_magnitudes(x), 8);
}

// reduce_sum over an unsplit dim: the split dim is a factor of both operand and result (the
// ReduceOp rule), so the result stays split and each device sums its own rows.
TEST(ShardingPropagation, ReduceSumOverAnUnsplitDimKeepsTheSplit) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(sum(arg(a, 0), {1})); };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 13))};
  const Jitted jitted = sharded(f, {on(kData)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  reduce_sum  f32[8]  P('data',)  block [2]\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_same_bits(jitted(args), unsharded(f, args));
}

// reduce_max over the split dim: as reduce_sum, with the reduction's own combiner in the
// all-reduce (HandleReduce all-reduces with the reduce's computation: max). max is exact and
// order-free, so the bits match.
TEST(ShardingPropagation, ReduceMaxOverASplitDimIsAllReducedWithMax) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(max(arg(a, 0), {0})); };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 14))};
  const Jitted jitted = sharded(f, {on(kData)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings, HasSubstr("  reduce_max  f32[6]  P()  block [6]\n"));
  EXPECT_THAT(dump.program, HasSubstr("pmax[axes=('data',)"));
  EXPECT_EQ(dump.collectives, (Counts{{"all-reduce(max)", 1}}));
  expect_same_bits(jitted(args), unsharded(f, args));
}

// dot_general, data parallel: lhs split on its batch (non-contracting) dim, rhs replicated.
// Shardy's DotGeneralOp rule maps the lhs non-contracting dim to the result's dim 0, and
// xla/service/spmd/dot_handler.cc PartitionBaseCase ("LHS and output have the same partitioned
// non-contracting dimensions") runs the local dot on the replicated rhs: no collective in the
// forward pass. Each output row is the same dot product as unsharded, but computed by an sgemm
// of 2 rows instead of 8, which OpenBLAS's Haswell/Zen kernels accumulate in another order than
// the 8-row one (SkylakeX's happen to agree): within the 12-term summation bound.
TEST(ShardingPropagation, DotOfABatchSplitLhsAndAReplicatedRhsNeedsNoCollective) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(matmul(arg(a, 0), arg(a, 1)));
  };
  const Array x = normal_array({8, 12}, 15);
  const Array w = normal_array({12, 16}, 16);
  const std::vector<Tree> args = {Tree(x), Tree(w)};
  const Jitted jitted = sharded(f, {on(kData), on(kReplicated)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  dot_general  f32[8,16]  P('data',)  block [2,16]\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_within_summation_bound(jitted(args).leaf(), unsharded(f, args).leaf(),
                                product_magnitudes(x, w), 12);
}

// conv_general_dilated (NHWC, HWIO) on a batch-split image: Shardy's ConvolutionOp rule gives
// the input batch dim and the result's one factor (op_sharding_rule_registry.cc,
// ConvolutionOp: batch, then feature and spatial factors), and
// xla/service/spmd/convolution_handler.cc partitions a batch-split lhs with a replicated kernel
// without communication. Under grad the kernel's cotangent sums over the batch
// (conv_general_dilated_transpose_rhs, the batch dim contracted), so each device's is a
// partial sum, all-reduced into the replicated gradient, as dot_general's contracting dim. The
// cotangent, a broadcast of 1.0, takes the image's batch split from the contraction it meets
// (one Shardy factor for both operands' batch dims), so the image is not gathered; the loss
// itself is dead under grad and, as XLA's HloDCE removes it, costs no all-reduce.
// The forward values are each image's own conv, but from a product of 2 images' patches instead
// of 8 (im2col and one sgemm), which OpenBLAS need not sum in the same order (measured: equal
// bits in most runs here, not in all): within the summation bound of each output's 27 terms, the
// conv of |x| with |w| their magnitudes.
TEST(ShardingPropagation, ConvOfABatchSplitImageAndItsKernelGradient) {
  const TreeFunction conv = [](const std::vector<Tree>& a) {
    return Tree(conv_general_dilated(arg(a, 0), arg(a, 1), {1, 1}, "SAME"));
  };
  const std::vector<Tree> args = {Tree(normal_array({8, 5, 5, 3}, 40)),
                                  Tree(normal_array({3, 3, 3, 4}, 41))};
  const Jitted forward = sharded(conv, {on(kData), on(kReplicated)});
  const Dump dump = dump_of(forward, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  conv_general_dilated  f32[8,5,5,4]  P('data',)  block [2,5,5,4]\n"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_within_summation_bound(
      forward(args).leaf(), unsharded(conv, args).leaf(),
      conv_general_dilated(abs(arg(args, 0)), abs(arg(args, 1)), {1, 1}, "SAME").to_doubles(), 27);

  const TreeFunction kernel_grad =
      grad([conv](const std::vector<Tree>& a) { return Tree(sum(conv(a).leaf())); }, {1});
  const Jitted backward = sharded(kernel_grad, {on(kData), on(kReplicated)});
  const Dump grad_dump = dump_of(backward, args);
  EXPECT_THAT(grad_dump.shardings,
              HasSubstr("  conv_general_dilated_transpose_rhs  f32[3,3,3,4]  P()  block "
                        "[3,3,3,4]\n"));
  EXPECT_EQ(grad_dump.collectives, (Counts{{"all-reduce", 1}}));
  // Each kernel element sums 8 images x 25 positions of |x| (the cotangent is all ones): the
  // per-device partial sums then the all-reduce stay within the summation bound of 200 terms.
  const std::vector<double> x = arg(args, 0).to_doubles();
  double magnitude = 0;
  for (double v : x) magnitude += std::abs(v);
  const Array expected = unsharded(kernel_grad, args).leaf();
  expect_within_summation_bound(backward(args).leaf(), expected,
                                std::vector<double>(expected.to_doubles().size(), magnitude),
                                200);
}

// dot_general with the contracting dim split the same way on both sides. The contracting
// factor is absent from the result (DotGeneralOp rule), so with no out_shardings the result is
// replicated; dot_handler.cc PartitionBaseCase ("LHS and RHS have the same partitioned
// contracting dimensions") computes the local partial dot, AllReduceAlongShardingDims, then
// Reshard(output_sharding): a result wanted split (out_shardings P('data')) is sliced after
// the all-reduce, which XLA's GPU pipeline fuses into a reduce-scatter
// (xla/service/gpu/transforms/reduce_scatter_creator.cc). JAX's docs/parallel.md lists the
// same two outcomes for jnp.dot(x: f32[8,4@X], y: f32[4@X,16]): "f32[8,16] (doing an
// all-reduce)" and "f32[8@X,16] (a reduce-scatter on the first axis)". 12 terms per element.
TEST(ShardingPropagation, DotWithSplitContractingDimsIsAPartialSum) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(matmul(arg(a, 0), arg(a, 1)));
  };
  const Array x = normal_array({8, 12}, 17);
  const Array w = normal_array({12, 16}, 18);
  const std::vector<Tree> args = {Tree(x), Tree(w)};
  const Array expected = unsharded(f, args).leaf();
  const std::vector<NamedSharding> in = {on(PartitionSpec{{}, {"data"}}), on(kData)};

  const Jitted replicated = sharded(f, in);
  const Dump all_reduced = dump_of(replicated, args);
  EXPECT_THAT(all_reduced.shardings,
              HasSubstr("  dot_general  f32[8,16]  P()  block [8,16]\n"));
  EXPECT_EQ(all_reduced.collectives, (Counts{{"all-reduce", 1}}));
  expect_within_summation_bound(replicated(args).leaf(), expected, product_magnitudes(x, w), 12);

  const Jitted split = sharded(f, in, std::vector<ShardingTree>{on(kData)});
  const Dump scattered = dump_of(split, args);
  EXPECT_THAT(scattered.shardings,
              HasSubstr("  dot_general  f32[8,16]  P('data',)  block [2,16]\n"));
  EXPECT_EQ(scattered.collectives, (Counts{{"reduce-scatter", 1}}));
  EXPECT_THAT(scattered.collective_lines, HasSubstr("reduce-scatter  f32[8,16] -> f32[2,16]"));
  expect_within_summation_bound(split(args).leaf(), expected, product_magnitudes(x, w), 12);
}

// FSDP: the lhs split on its batch dim and the rhs (a weight) split on its contracting dim over
// the same axis. A tensor splits over 'data' once, so the result takes it from the lhs (the
// only result factor that holds it) and the rhs is gathered: dot_handler.cc PartitionBaseCase
// "LHS and output have the same partitioned non-contracting dimensions" ->
// rhs.Reshard(HloSharding::Replicate()), an all-gather of the weight. JAX's docs/parallel.md:
// jnp.dot(x: f32[8,4], y: f32[4@x,16]) "likely by doing an all-gather on y as in FSDP".
// Each device's rows come from a 2-row sgemm: within the 12-term summation bound of the 8-row
// one (see DotOfABatchSplitLhsAndAReplicatedRhsNeedsNoCollective).
TEST(ShardingPropagation, FsdpAllGathersTheWeightSplitOnItsContractingDim) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(matmul(arg(a, 0), arg(a, 1)));
  };
  const Array x = normal_array({8, 12}, 19);
  const Array w = normal_array({12, 16}, 20);
  const std::vector<Tree> args = {Tree(x), Tree(w)};
  const Jitted jitted = sharded(f, {on(kData), on(kData)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings,
              HasSubstr("  dot_general  f32[8,16]  P('data',)  block [2,16]\n"));
  EXPECT_EQ(dump.collectives, (Counts{{"all-gather", 1}}));
  EXPECT_THAT(dump.collective_lines, HasSubstr("all-gather  f32[3,16] -> f32[12,16]"));
  expect_within_summation_bound(jitted(args).leaf(), unsharded(f, args).leaf(),
                                product_magnitudes(x, w), 12);
}

// with_sharding_constraint is "a strict constraint for the GSPMD partitioner and not a hint"
// (jax/_src/pjit.py with_sharding_constraint's docstring). Shardy's rule for it is pointwise
// (ShardingConstraintOp heads createOpShardingRule's pointwise list), so the constraint spreads
// backward to tanh and forward to the multiply; x and v, replicated, are cut on each device
// (a dynamic-slice), not communicated.
TEST(ShardingPropagation, WithShardingConstraintSpreadsForwardAndBackward) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    const Array y = with_sharding_constraint(tanh(arg(a, 0)), on(kData));
    return Tree(y * arg(a, 1) + 1.0);
  };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 21)), Tree(normal_array({8, 6}, 22))};
  const Jitted jitted = sharded(f, {on(kReplicated), on(kReplicated)});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings, HasSubstr("  tanh  f32[8,6]  P('data',)  block [2,6]\n"
                                        "  sharding_constraint  f32[8,6]  P('data',)"
                                        "  block [2,6]\n"
                                        "  mul  f32[8,6]  P('data',)  block [2,6]\n"
                                        "  add  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_THAT(dump.program, HasSubstr("dynamic_slice"));
  EXPECT_EQ(dump.collectives, Counts{});
  expect_same_bits(jitted(args), unsharded(f, args));
}

// Under grad the cotangent is constrained too: jax/_src/pjit.py registers
// ad.deflinear2(sharding_constraint_p, lambda ct, _, **params:
// (sharding_constraint_p.bind(ct, **params),)). The gradient is element-wise in x (the same
// bits); only the loss sums the split value (one all-reduce, 48 terms); nothing is gathered.
TEST(ShardingPropagation, WithShardingConstraintConstrainsItsCotangentUnderGrad) {
  const TreeFunction loss = [](const std::vector<Tree>& a) {
    return Tree(sum(with_sharding_constraint(tanh(arg(a, 0)), on(kData)) * arg(a, 1)));
  };
  const TreeFunction f = value_and_grad(loss);
  const Array x = normal_array({8, 6}, 23);
  const Array v = normal_array({8, 6}, 24);
  const std::vector<Tree> args = {Tree(x), Tree(v)};
  const Jitted jitted = sharded(f, {on(kReplicated), on(kReplicated)});
  const Dump dump = dump_of(jitted, args);
  const std::string constrained = "  sharding_constraint  f32[8,6]  P('data',)";
  const size_t primal = dump.shardings.find(constrained);
  ASSERT_NE(primal, std::string::npos);
  EXPECT_NE(dump.shardings.find(constrained, primal + 1), std::string::npos)
      << "the cotangent's sharding_constraint is missing:\n"
      << dump.shardings;
  EXPECT_THAT(dump.shardings, HasSubstr("  output 1  f32[8,6]  P('data',)\n"));
  EXPECT_EQ(dump.collectives, (Counts{{"all-reduce", 1}}));

  const Tree got = jitted(args);
  const Tree want = unsharded(f, args);
  expect_same_bits(got[1], want[1]);
  const std::vector<double> t = tanh(x).to_doubles(), w = v.to_doubles();
  double magnitude = 0;
  for (size_t i = 0; i < t.size(); ++i) magnitude += std::abs(t[i] * w[i]);
  expect_within_summation_bound(got[0].leaf(), want[0].leaf(), {magnitude}, 48);
}

// out_shardings are honoured: a split result wanted replicated is all-gathered (XLA's
// PartitionedHlo::Reshard to a replicated sharding), and a result wanted split makes the ops
// that produce it run on blocks (Shardy propagates a result's sharding backward like any
// other, through the add to tanh; the replicated x is cut, not communicated).
TEST(ShardingPropagation, OutShardingsAreHonoured) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(arg(a, 0) * 2.0); };
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 25))};
  const Jitted gathered = sharded(f, {on(kData)}, std::vector<ShardingTree>{on(kReplicated)});
  const Dump gathered_dump = dump_of(gathered, args);
  EXPECT_THAT(gathered_dump.shardings, HasSubstr("  output 0  f32[8,6]  P()\n"));
  EXPECT_EQ(gathered_dump.collectives, (Counts{{"all-gather", 1}}));
  expect_same_bits(gathered(args), unsharded(f, args));

  const TreeFunction g = [](const std::vector<Tree>& a) { return Tree(tanh(arg(a, 0)) + 1.0); };
  const Jitted split = sharded(g, {on(kReplicated)}, std::vector<ShardingTree>{on(kData)});
  const Dump split_dump = dump_of(split, args);
  EXPECT_THAT(split_dump.shardings,
              HasSubstr("  tanh  f32[8,6]  P('data',)  block [2,6]\n"));
  EXPECT_THAT(split_dump.shardings, HasSubstr("  output 0  f32[8,6]  P('data',)\n"));
  EXPECT_EQ(split_dump.collectives, Counts{});
  expect_same_bits(split(args), unsharded(g, args));
}

// A 2-D mesh ('x': 2, 'y': 2). P('x', 'y') splits two dims (pointwise and transpose rules as
// above: the transpose is P('y', 'x')). P(('x', 'y'),) splits one dim over both axes, x major:
// device (x=i, y=j) holds block 2i + j (jax.sharding.Mesh's row-major device order; Shardy
// keeps a dim's axes in order), so a row-wise sum stays split with the same bits, and a sum
// down the split dim is completed by all-reduces over the two axes, within the bound.
TEST(ShardingPropagation, GridMeshSplitsTwoDimsOrOneDimOverBothAxes) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    const Array y = arg(a, 0) * arg(a, 1) + 1.0;
    const Array t = tanh(arg(a, 2));
    return Tree::tuple({Tree(transpose(y)), Tree(sum(t, {1})), Tree(sum(t, {0}))});
  };
  const Array c = normal_array({8, 6}, 28);
  const std::vector<Tree> args = {Tree(normal_array({4, 8}, 26)), Tree(normal_array({4, 8}, 27)),
                                  Tree(c)};
  const Jitted jitted = sharded(f, {on_grid(PartitionSpec{{"x"}, {"y"}}), on_grid(kReplicated),
                                    on_grid(PartitionSpec{{"x", "y"}})});
  const Dump dump = dump_of(jitted, args);
  EXPECT_THAT(dump.shardings, HasSubstr("  mul  f32[4,8]  P('x', 'y')  block [2,4]\n"
                                        "  add  f32[4,8]  P('x', 'y')  block [2,4]\n"));
  EXPECT_THAT(dump.shardings,
              HasSubstr("  transpose  f32[8,4]  P('y', 'x')  block [4,2]\n"));
  EXPECT_THAT(dump.shardings,
              HasSubstr("  tanh  f32[8,6]  P(('x', 'y'),)  block [2,6]\n"));
  EXPECT_THAT(dump.shardings,
              HasSubstr("  reduce_sum  f32[8]  P(('x', 'y'),)  block [2]\n"));
  EXPECT_THAT(dump.shardings, HasSubstr("  reduce_sum  f32[6]  P()  block [6]\n"));
  // XLA completes the column sum with one all-reduce over the four devices; the engine issues
  // one per mesh axis. Either way only all-reduces.
  ASSERT_EQ(dump.collectives.size(), 1u);
  EXPECT_EQ(dump.collectives.begin()->first, "all-reduce");

  const Tree got = jitted(args);
  const Tree want = unsharded(f, args);
  expect_same_bits(got[0], want[0]);
  expect_same_bits(got[1], want[1]);
  expect_within_summation_bound(got[2].leaf(), want[2].leaf(), column_magnitudes(tanh(c)), 8);
}

// ---------------------------------------------------------------------------------------------
// Errors, in jax-v0.11.0's words (jax/_src/... at that tag), then the engine's fix where it
// adds one.

std::string error_calling(const Jitted& f, const std::vector<Tree>& args) {
  return testing::error_of([&] { f(args); });
}

const char* kDataSharding =
    "NamedSharding(mesh=Mesh('data': 4, axis_types=(Auto,)), spec=P('data',), "
    "memory_kind=device)";
const char* kTooLongSharding =
    "NamedSharding(mesh=Mesh('data': 4, axis_types=(Auto,)), spec=P('data', None), "
    "memory_kind=device)";

// jax/_src/named_sharding.py _check_mesh_resource_axis (via check_pspec, which jaxlib's
// NamedSharding constructor calls): f"Resource axis: {r} of {pspec} is not found in mesh:
// {tuple(mesh.shape.keys())}.", pspec printed by P.__repr__.
TEST(ShardingErrors, AMeshAxisThatDoesNotExist) {
  EXPECT_THAT(testing::error_of([] { NamedSharding(mesh(), PartitionSpec{{"model"}}); }),
              StartsWith("Resource axis: model of P('model',) is not found in mesh: "
                         "('data',). Name one of the mesh's axes"));
  EXPECT_THAT(testing::error_of([] {
                NamedSharding(grid(), PartitionSpec{{}, {"data"}});
              }),
              StartsWith("Resource axis: data of P(None, 'data') is not found in mesh: "
                         "('x', 'y')."));
}

// jax/_src/pjit.py pjit_check_aval_sharding("pjit arguments") wrapping
// NamedSharding.check_compatible_aval (jax/_src/named_sharding.py).
TEST(ShardingErrors, ASpecLongerThanAnArgumentsRank) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return a[0]; };
  const Jitted jitted = sharded(f, {on(PartitionSpec{{"data"}, {}})});
  EXPECT_EQ(error_calling(jitted, {Tree(normal_array({8}, 30))}),
            std::string("One of pjit arguments with pytree key path args[0] is incompatible with "
                        "its sharding annotation ") +
                kTooLongSharding + ": Sharding " + kTooLongSharding +
                " is only valid for values of rank at least 2, but was applied to a value of "
                "rank 1.");
}

// jax/_src/pjit.py with_sharding_constraint calls pjit_check_aval_sharding(shardings_flat,
// x_avals_flat, ("",) * len(shardings_flat), "with_sharding_constraint arguments",
// allow_uneven_sharding=True): no key path, and a rank error is still an error.
TEST(ShardingErrors, ASpecLongerThanTheRankInWithShardingConstraint) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(with_sharding_constraint(arg(a, 0) * 2.0, on(PartitionSpec{{"data"}, {}})));
  };
  const Jitted jitted = sharded(f, {on(kData)});
  EXPECT_EQ(error_calling(jitted, {Tree(normal_array({8}, 31))}),
            std::string("One of with_sharding_constraint arguments is incompatible with its "
                        "sharding annotation ") +
                kTooLongSharding + ": Sharding " + kTooLongSharding +
                " is only valid for values of rank at least 2, but was applied to a value of "
                "rank 1.");
}

// ... but an indivisible dim is not (allow_uneven_sharding=True; the docstring: "constrain
// intermediate values to an uneven sharding"). XLA pads the 6 elements to 8 and splits them;
// the engine keeps the dim whole. The values are the same.
TEST(ShardingErrors, AnUnevenWithShardingConstraintIsAllowed) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(with_sharding_constraint(arg(a, 0) * 2.0, on(kData)) + 1.0);
  };
  const std::vector<Tree> args = {Tree(normal_array({6}, 32))};
  const Jitted jitted = sharded(f, {on(kReplicated)});
  EXPECT_EQ(error_calling(jitted, args), "(no error)");
  expect_same_bits(jitted(args), unsharded(f, args));
}

// jax/_src/pjit.py _check_and_canonicalize_out_shardings: pjit_check_aval_sharding(...,
// debug_info.safe_result_paths(...), "pjit outputs", allow_uneven_sharding=False), which
// re-raises jax/_src/sharding.py _common_shard_shape's IndivisibleError as f"One of
// {what_aval}{name_str} was given the sharding {str(e)}." (JAX then adds " This error occurs
// at source: ..." with the Python line, which the engine has none of). Result paths are
// jax/_src/linear_util.py DebugInfo.set_result_paths': "result", "result[1]".
TEST(ShardingErrors, AnIndivisibleOutShardingsDim) {
  const std::string tail =
      std::string(" was given the sharding ") + kDataSharding +
      " implies that array axis 0 is partitioned 4 times, but the dimension size is 6 (full "
      "shape: (6,), per-dimension tiling factors: (4,) should evenly divide the shape).";
  const std::vector<Tree> args = {Tree(normal_array({8, 6}, 33))};
  const TreeFunction column_sums = [](const std::vector<Tree>& a) {
    return Tree(sum(arg(a, 0), {0}));
  };
  EXPECT_EQ(
      error_calling(sharded(column_sums, {on(kData)}, std::vector<ShardingTree>{on(kData)}), args),
      "One of pjit outputs with pytree key path result" + tail);
  const TreeFunction pair = [](const std::vector<Tree>& a) {
    return Tree::tuple({Tree(arg(a, 0) * 2.0), Tree(sum(arg(a, 0), {0}))});
  };
  EXPECT_EQ(error_calling(sharded(pair, {on(kData)}, std::vector<ShardingTree>{on(kData)}), args),
            "One of pjit outputs with pytree key path result[1]" + tail);
}

// Shardings on meshes of other devices. jax/_src/interpreters/pxla.py
// _get_and_check_device_assignment raises DeviceAssignmentMismatchError for the first sharding
// whose devices differ from the first in_sharding's (in_shardings as ARG_SHARDING, then
// out_shardings as OUT_SHARDING, then shardings inside the computation), and
// jax/_src/stages.py _device_assignment_mismatch_error words it. The arguments are uncommitted
// arrays, which _find_arg_mismatch matches to no argument, so each side is named by its
// MismatchType (MismatchType.__str__, DeviceAssignmentMismatch._str).
const Mesh& two_devices() {
  static const Mesh mesh(DeviceSet(2), {{"data", 2}});
  return mesh;
}

TEST(ShardingErrors, InShardingsOnTwoMeshes) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(arg(a, 0) + arg(a, 1)); };
  const Jitted jitted = sharded(f, {on(kData), NamedSharding(two_devices(), kData)});
  EXPECT_THAT(error_calling(jitted, {Tree(normal_array({8}, 34)), Tree(normal_array({8}, 35))}),
              StartsWith("Received incompatible devices for jitted computation. Got "
                         "ARG_SHARDING with device ids [0, 1, 2, 3] on platform CPU and "
                         "ARG_SHARDING with device ids [0, 1] on platform CPU. Put every "
                         "in_sharding on the same Mesh"));
}

TEST(ShardingErrors, OutShardingsOnAnotherMesh) {
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(arg(a, 0) * 2.0); };
  const Jitted jitted =
      sharded(f, {on(kData)}, std::vector<ShardingTree>{NamedSharding(two_devices(), kData)});
  EXPECT_THAT(error_calling(jitted, {Tree(normal_array({8}, 36))}),
              StartsWith("Received incompatible devices for jitted computation. Got "
                         "ARG_SHARDING with device ids [0, 1, 2, 3] on platform CPU and explicit "
                         "output sharding with device ids [0, 1] on platform CPU."));
}

// A constraint inside the computation: MismatchType.SHARDING_INSIDE_COMPUTATION is named
// f'{eqn_name} inside {api_name}' (JAX appends " at <source line>").
TEST(ShardingErrors, WithShardingConstraintOnAnotherMesh) {
  const TreeFunction f = [](const std::vector<Tree>& a) {
    return Tree(with_sharding_constraint(arg(a, 0) * 2.0, NamedSharding(two_devices(), kData)));
  };
  const Jitted jitted = sharded(f, {on(kData)});
  EXPECT_THAT(error_calling(jitted, {Tree(normal_array({8}, 37))}),
              StartsWith("Received incompatible devices for jitted computation. Got "
                         "ARG_SHARDING with device ids [0, 1, 2, 3] on platform CPU and "
                         "sharding_constraint inside jit with device ids [0, 1] on platform "
                         "CPU."));
}

// JAX's check compares device assignments only (_get_and_check_device_assignment compares
// sh._device_assignment), so two meshes of the same devices are no "incompatible devices";
// the engine, which partitions over one Mesh, refuses them in its own words.
TEST(ShardingErrors, MeshesOfTheSameDevicesOnOtherAxesAreNoDeviceMismatch) {
  static const Mesh model(DeviceSet(4), {{"model", 4}});
  const TreeFunction f = [](const std::vector<Tree>& a) { return Tree(arg(a, 0) + arg(a, 1)); };
  const Jitted jitted = sharded(f, {on(kData), NamedSharding(model, PartitionSpec{{"model"}})});
  const std::string error =
      error_calling(jitted, {Tree(normal_array({8}, 38)), Tree(normal_array({8}, 39))});
  EXPECT_THAT(error, Not(HasSubstr("Received incompatible devices")));
  EXPECT_THAT(error, HasSubstr("Mesh('data': 4) and Mesh('model': 4) (the same devices"));
}

}  // namespace
}  // namespace pmap_engine
