// Loop fusion (pmap_engine/src/runtime/loop_fusion.h), as runtime::compile runs it: which equations a group takes in, and
// that a fused loop computes every bit the unfused ops compute. The reference is the same
// function run op by op (DisableJit), where each primitive's own kernel runs alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pmap_engine/ops.h"
#include "pmap_engine/optim.h"
#include "pmap_engine/transforms.h"
#include "engine_test_util.h"
#include "runtime/compile.h"
#include "runtime/program_cache.h"

namespace pmap_engine {
namespace {

using testing::expect_same_bits;
using testing::normal_array;
using testing::op_by_op;

runtime::TracedFunction traced(const TreeFunction& function, const std::vector<Tree>& args) {
  return runtime::trace_function(
      function, args, {}, [](size_t, size_t, const Array& leaf) { return leaf.shape(); }, "test");
}

// The fused equations of `function`'s program, as "fusion[calls=...]" lines' call lists.
std::vector<std::string> fusion_calls(const TreeFunction& function, const std::vector<Tree>& args) {
  const auto executable = runtime::compile(traced(function, args).program);
  std::vector<std::string> calls;
  for (const ir::Equation& equation : executable->program.equations) {
    if (equation.primitive->name == "fusion") calls.push_back(equation.params.text("calls"));
  }
  return calls;
}

// optax.adam's update and apply_updates: per leaf a dozen element-wise ops that the trace
// interleaves across leaves (tree_map per stage). Sizes that are not multiples of the block.
TEST(LoopFusion, AdamUpdateIsFusedAndBitIdenticalToOpByOp) {
  const optim::GradientTransformation optimizer = optim::adam(1e-3);
  const Tree params = Tree::dict({{"w", normal_array({7, 301}, 1)}, {"b", normal_array({1000}, 2)}});
  const Tree grads = Tree::dict({{"w", normal_array({7, 301}, 3)}, {"b", normal_array({1000}, 4)}});
  const TreeFunction step = [&](const std::vector<Tree>& args) {
    auto [updates, state] = optimizer.update(args[1], args[2], args[0]);
    return Tree::tuple({optim::apply_updates(args[0], updates), state});
  };
  const Tree state = optimizer.init(params);
  Tree fused = jit(step)({params, grads, state});
  const Tree reference = op_by_op(step, {params, grads, state});
  expect_same_bits(fused, reference);
  // Each leaf's update (moments, bias correction, sqrt, division, scaling, the new value) is one
  // loop per shape: two fusions, whatever order the trace interleaved the leaves in.
  EXPECT_EQ(fusion_calls(step, {params, grads, state}).size(), 2u);
}

// t = x * 2 is read by a reduction before u = t * 3: moving t's loop to u's place would run it
// after its reader, so u starts a group of its own, which v = u + r then joins.
TEST(LoopFusion, AGroupNeverMovesPastAnOutsideReaderOfItsValues) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    const Array t = args[0].leaf() * 2.0;
    const Array r = sum(t);
    const Array u = t * 3.0;
    return Tree(u + r);
  };
  const Array x = normal_array({700}, 5);
  EXPECT_THAT(fusion_calls(f, {x}), ::testing::ElementsAre("mul,add"));
  const Tree reference = op_by_op(f, {x});
  expect_same_bits(jit(f)({x}), reference);
}

// A value read outside its group is materialised as an output of the fused loop; the others
// exist only in the loop's scratch rows.
TEST(LoopFusion, ValuesReadOutsideTheGroupAreItsOutputs) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    const Array a = tanh(args[0].leaf());
    const Array b = a * a;
    const Array c = b + 1.0;
    return Tree::tuple({Tree(c), Tree(sum(a))});
  };
  const Array x = normal_array({33, 17}, 6);
  const auto executable = runtime::compile(traced(f, {x}).program);
  const ir::Equation* fusion = nullptr;
  for (const ir::Equation& equation : executable->program.equations) {
    if (equation.primitive->name == "fusion") fusion = &equation;
  }
  ASSERT_NE(fusion, nullptr);
  EXPECT_EQ(fusion->params.text("calls"), "tanh,mul,add");
  EXPECT_EQ(fusion->outputs.size(), 2u);  // a (read by the sum) and c (a program output)
  EXPECT_EQ(executable->fused_equations, 3);
  const Tree reference = op_by_op(f, {x});
  expect_same_bits(jit(f)({x}), reference);
}

// A bias row [1, N] (and [1, A, B] against [K, A, B]) broadcast along the leading dimensions is
// read periodically; periods of 7 and 15 elements do not divide the 512-element block, so rows
// straddle blocks.
TEST(LoopFusion, ABroadcastRowIsReadPeriodicallyAcrossBlocks) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();
    const Array& b = args[1].leaf();
    return Tree(tanh(x + b) * 2.0);
  };
  for (const auto& [x_shape, b_shape] :
       std::vector<std::pair<Shape, Shape>>{{{300, 7}, {7}}, {{70, 3, 5}, {3, 5}}}) {
    const Array x = normal_array(x_shape, 8);
    const Array b = normal_array(b_shape, 9);
    EXPECT_THAT(fusion_calls(f, {x, b}), ::testing::ElementsAre("add,tanh,mul"));
    const Tree reference = op_by_op(f, {x, b});
    expect_same_bits(jit(f)({x, b}), reference);
  }
}

// A donated argument that dies in the loop is overwritten in place, block by block, after each
// block has been read.
TEST(LoopFusion, ADonatedInputIsOverwrittenInPlaceByTheLoop) {
  JitOptions options;
  options.donate_argnums = {0};
  const TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree((args[0].leaf() - 1.0) * 2.0 + args[0].leaf());
  };
  const Array x = normal_array({2049}, 7);
  const Tree reference = op_by_op(f, {x});
  Jitted step = jit(f, options);
  Tree fused = step({Array(x.buffer())});  // a copy holding the same storage is donated
  expect_same_bits(fused, reference);
  EXPECT_EQ(step.last_execution().donated_reuses, 0);  // x itself still holds the storage
  Array own = Array::from_floats({2049}, x.to_floats());
  Tree in_place = step({own});
  EXPECT_EQ(step.last_execution().donated_reuses, 1);
  expect_same_bits(in_place, reference);
}

// Per-row and per-feature statistics read through views, not materialised: LayerNorm's
// [B, T] -> [B, T, D] (a broadcast_in_dim inside the loop), a [B, T, 1] operand that the
// element-wise op itself stretches, and BatchNorm's [C] -> [B, H, W, C]. Rows of 10 and 6
// elements straddle the 512-element blocks.
TEST(LoopFusion, StatisticsAreReadThroughBroadcastViews) {
  const TreeFunction layer_norm_like = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();  // [B, T, D]
    const Array row_mean = broadcast_in_dim(mean(x, {2}), x.shape(), {0, 1});
    const Array row_max = max(x, {2}, /*keepdims=*/true);  // [B, T, 1]
    return Tree((x - row_mean) * 3.0 + row_max);
  };
  const Array tokens = normal_array({7, 13, 10}, 10);
  EXPECT_THAT(fusion_calls(layer_norm_like, {tokens}),
              ::testing::ElementsAre("broadcast_in_dim,sub,mul,add"));
  expect_same_bits(jit(layer_norm_like)({tokens}), op_by_op(layer_norm_like, {tokens}));

  const TreeFunction batch_norm_like = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();  // [B, H, W, C]
    const Array& scale = args[1].leaf();  // [C]
    return Tree(tanh(x * broadcast_in_dim(scale, x.shape(), {3})));
  };
  const Array images = normal_array({5, 9, 9, 6}, 11);
  const Array scale = normal_array({6}, 12);
  EXPECT_THAT(fusion_calls(batch_norm_like, {images, scale}),
              ::testing::ElementsAre("broadcast_in_dim,mul,tanh"));
  expect_same_bits(jit(batch_norm_like)({images, scale}),
                   op_by_op(batch_norm_like, {images, scale}));
}

// A broadcast that an equation outside the group reads (here a reduction) is materialised where
// it stands; the loop reads that value.
TEST(LoopFusion, ABroadcastReadOutsideTheGroupStaysMaterialised) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();
    const Array b = broadcast_in_dim(args[1].leaf(), x.shape(), {1});
    return Tree::tuple({Tree((x + b) * 2.0), Tree(sum(b, {1}))});
  };
  const Array x = normal_array({40, 30}, 13);
  const Array v = normal_array({30}, 14);
  EXPECT_THAT(fusion_calls(f, {x, v}), ::testing::ElementsAre("add,mul"));
  expect_same_bits(jit(f)({x, v}), op_by_op(f, {x, v}));
}

// jax.nn.relu and its VJP: the comparison, the broadcast zeros and select_n run in the loop,
// the pred between them held as 0 or 1 in f32.
TEST(LoopFusion, ReluAndItsGradientSelectInTheLoop) {
  const TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(sum(relu(args[0].leaf()) * args[1].leaf()));
  };
  const TreeFunction gradient = grad(loss);
  const Array x = normal_array({3, 700}, 15);
  const Array w = normal_array({3, 700}, 16);
  EXPECT_THAT(fusion_calls(gradient, {x, w}), ::testing::ElementsAre(
                         "broadcast_in_dim,le,select_n,mul",
                         "broadcast_in_dim,mul,mul,broadcast_in_dim,select_n,select_n"));
  expect_same_bits(jit(gradient)({x, w}), op_by_op(gradient, {x, w}));
}

// Preds that cross the loop's edge: a bool argument read (converted to 0 or 1) and a
// comparison's result stored as bool (a program output).
TEST(LoopFusion, PredsEnterAndLeaveTheLoopAsBool) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();
    const Array& keep = args[1].leaf();
    const Array chosen = where(keep, x * 2.0, x + 1.0);
    return Tree::tuple({Tree(chosen), Tree(greater(chosen, scalar_like(x, 0.5)))});
  };
  const Array x = normal_array({1111}, 17);
  std::vector<double> keep_values(1111);
  for (size_t i = 0; i < keep_values.size(); ++i) keep_values[i] = i % 3 == 0;
  const Array keep = astype(Array::from_doubles({1111}, keep_values), DType::bool_);
  EXPECT_THAT(fusion_calls(f, {x, keep}), ::testing::ElementsAre("add,mul,select_n,gt"));
  expect_same_bits(jit(f)({x, keep}), op_by_op(f, {x, keep}));
}

// A bool result may take the storage of a dying f32 input of the same byte size, but here that
// input is a row [1, N] that every row of the loop reads again: the output gets storage of its
// own (else the second row of blocks would read the first's stored preds as the row's values).
TEST(LoopFusion, AnOutputNeverOverwritesABroadcastOperandInPlace) {
  JitOptions options;
  options.donate_argnums = {0};
  const TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree(greater(args[1].leaf(), args[0].leaf()));
  };
  const Array threshold = normal_array({1, 1024}, 18);  // 4096 bytes, as the bool [4, 1024]
  const Array y = normal_array({4, 1024}, 19);
  const Tree reference = op_by_op(f, {threshold, y});
  Jitted step = jit(f, options);
  expect_same_bits(step({Array::from_floats({1, 1024}, threshold.to_floats()), y}), reference);
  EXPECT_EQ(step.last_execution().donated_reuses, 1);  // taken, then given up
}

// jax.nn.softmax: exp(x - max) in one loop reading the row maxima as a view, the division by the
// row sums in another.
TEST(LoopFusion, SoftmaxRunsItsElementwisePartsInLoops) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree(softmax(args[0].leaf(), -1));
  };
  const Array x = normal_array({4, 17, 23}, 20);
  EXPECT_THAT(fusion_calls(f, {x}), ::testing::ElementsAre("sub,exp", "div"));
  expect_same_bits(jit(f)({x}), op_by_op(f, {x}));
}

// The exact gelu (erfc) and sigmoid (logistic) compute in the loop what their kernels do over
// the whole buffer; 1000 elements are two blocks, the second not full.
TEST(LoopFusion, ErfcAndLogisticRunInTheLoop) {
  const TreeFunction f = [](const std::vector<Tree>& args) {
    const Array& x = args[0].leaf();
    return Tree(gelu(x, /*approximate=*/false) + sigmoid(x * 3.0));
  };
  const Array x = normal_array({1000}, 21);
  EXPECT_THAT(fusion_calls(f, {x}), ::testing::ElementsAre(::testing::AllOf(
                                        ::testing::HasSubstr("erfc"),
                                        ::testing::HasSubstr("logistic"))));
  expect_same_bits(jit(f)({x}), op_by_op(f, {x}));
}

}  // namespace
}  // namespace pmap_engine
