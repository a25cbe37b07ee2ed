// jit with shardings on a training step: the partitioned program computes the unsharded
// program's values (up to the order of the sums the collectives split), for data parallelism
// (batch split, parameters replicated) and FSDP (parameters split on their leading dim), and
// inserts the collectives XLA's SPMD partitioner inserts for them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "engine_test_util.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/optim.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;
using testing::normal_array;

constexpr int64_t kDevices = 4;

const Mesh& mesh() {
  static const Mesh mesh(DeviceSet(kDevices), {{"data", kDevices}});
  return mesh;
}
NamedSharding on(PartitionSpec spec) { return NamedSharding(mesh(), std::move(spec)); }

Tree mlp_params() {
  return Tree::dict({{"w0", Tree(normal_array({16, 32}, 1) * 0.3)},
                     {"b0", Tree(normal_array({32}, 2) * 0.1)},
                     {"w1", Tree(normal_array({32, 10}, 3) * 0.3)},
                     {"b1", Tree(normal_array({10}, 4) * 0.1)}});
}

// The global batch's mean softmax cross-entropy.
Tree mlp_loss(const std::vector<Tree>& args) {
  const Tree& p = args[0];
  const Array hidden = tanh(matmul(args[1].leaf(), p["w0"].leaf()) + p["b0"].leaf());
  const Array logits = matmul(hidden, p["w1"].leaf()) + p["b1"].leaf();
  return Tree(mean(softmax_cross_entropy_with_integer_labels(logits, args[2].leaf())));
}

// train_step(params, opt_state, x, y) -> (params, opt_state, loss, grads) with Adam.
TreeFunction train_step() {
  const optim::GradientTransformation adam = optim::adam(1e-2);
  const TreeFunction loss_and_grads = value_and_grad(mlp_loss);
  return [adam, loss_and_grads](const std::vector<Tree>& args) {
    const Tree out = loss_and_grads({args[0], args[2], args[3]});
    auto [updates, state] = adam.update(out[1], args[1], args[0]);
    return Tree::tuple({optim::apply_updates(args[0], updates), state, out[0], out[1]});
  };
}

std::vector<Tree> step_arguments() {
  const Tree params = mlp_params();
  std::vector<float> labels(64);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<float>((i * 7) % 10);
  return {params, optim::adam(1e-2).init(params), Tree(normal_array({64, 16}, 5)),
          Tree(astype(Array::from_floats({64}, labels), DType::i32))};
}

// FSDP: a leaf split on its leading dim over 'data' where it divides, else replicated.
NamedSharding fsdp(const Array& leaf) {
  if (leaf.ndim() > 0 && leaf.shape()[0] % kDevices == 0) return on(PartitionSpec{{"data"}});
  return on(PartitionSpec{});
}
ShardingTree fsdp_tree(const Tree& tree) {
  std::vector<NamedSharding> leaves;
  for (const Array& leaf : tree.leaves()) leaves.push_back(fsdp(leaf));
  return ShardingTree(leaves);
}

JitOptions data_parallel() {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>{on({}), on({}), on({{"data"}}), on({{"data"}})};
  options.out_shardings = std::vector<ShardingTree>{on({})};
  return options;
}

JitOptions fully_sharded(const std::vector<Tree>& args) {
  JitOptions options;
  const ShardingTree params = fsdp_tree(args[0]);
  const ShardingTree state = fsdp_tree(args[1]);
  options.in_shardings = std::vector<ShardingTree>{params, state, on({{"data"}}), on({{"data"}})};
  options.out_shardings = std::vector<ShardingTree>{params, state, on({}), params};
  return options;
}

// Every leaf within `tolerance` relative to the largest magnitude of the unsharded leaf.
void expect_close(const Tree& actual, const Tree& expected, double tolerance) {
  const std::vector<Array> a = actual.leaves();
  const std::vector<Array> b = expected.leaves();
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l) {
    ASSERT_EQ(a[l].shape(), b[l].shape()) << "leaf " << l;
    const std::vector<double> x = a[l].to_doubles();
    const std::vector<double> y = b[l].to_doubles();
    double scale = 1e-30;
    for (double v : y) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_NEAR(x[i], y[i], tolerance * scale) << "leaf " << l << " element " << i;
    }
  }
}

TEST(SpmdTraining, DataParallelStepMatchesTheUnshardedStep) {
  const std::vector<Tree> args = step_arguments();
  const Tree expected = jit(train_step())(args);
  const Jitted sharded = jit(train_step(), data_parallel(), "train_step");
  // f32 sums split over 4 devices then added: within a few ulps of the range of each leaf.
  expect_close(sharded(args), expected, 1e-5);
  EXPECT_EQ(sharded.last_execution().num_devices, kDevices);
  EXPECT_GT(sharded.last_execution().num_collectives, 0);
}

TEST(SpmdTraining, FullyShardedStepMatchesTheUnshardedStep) {
  const std::vector<Tree> args = step_arguments();
  const Tree expected = jit(train_step())(args);
  const Jitted sharded = jit(train_step(), fully_sharded(args), "train_step");
  expect_close(sharded(args), expected, 1e-5);
}

// The collectives of the dump, one "kind operand -> result" per line, in program order.
std::vector<std::string> collectives(const std::string& dump) {
  std::vector<std::string> lines;
  std::istringstream in(dump.substr(dump.find("# Collectives")));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && line.rfind("  total", 0) != 0 && !line.empty()) {
    lines.push_back(line.substr(2, line.find("  [") - 2));
  }
  return lines;
}

// Data parallel: the forward pass needs no communication; the loss and each gradient are sums
// over the split batch, each all-reduced once. JAX's dot transpose rule forms a weight's
// gradient transposed and transposes it back; XLA simplifies that to the product of the swapped
// operands before partitioning, so the all-reduce is of the gradient itself.
TEST(SpmdTraining, DataParallelAllReducesTheLossAndEachGradient) {
  const std::vector<Tree> args = step_arguments();
  const std::string dump =
      jit(train_step(), data_parallel(), "train_step").partitioned_program_text(args);
  EXPECT_EQ(collectives(dump), (std::vector<std::string>{
                                   "all-reduce  f32[] -> f32[]",
                                   "all-reduce  f32[10] -> f32[10]",
                                   "all-reduce  f32[32,10] -> f32[32,10]",
                                   "all-reduce  f32[32] -> f32[32]",
                                   "all-reduce  f32[16,32] -> f32[16,32]",
                               }));
}

// FSDP on 4 devices: w0 [16,32], b0 [32] and w1 [32,10] split on their leading dim, b1 [10]
// replicated (10 does not divide by 4). Forward: w0, b0's broadcast row and w1 all-gathered
// before use. Backward: w1 gathered again for the activation's cotangent; each split leaf's
// gradient is reduce-scattered onto its split (a sum over the batch, wanted split on the
// leaf's leading dim), b1's and the loss's all-reduced.
TEST(SpmdTraining, FullyShardedAllGathersWeightsAndReduceScattersTheirGradients) {
  const std::vector<Tree> args = step_arguments();
  const std::string dump =
      jit(train_step(), fully_sharded(args), "train_step").partitioned_program_text(args);
  EXPECT_EQ(collectives(dump), (std::vector<std::string>{
                                   "all-gather  f32[4,32] -> f32[16,32]",
                                   "all-gather  f32[1,8] -> f32[1,32]",
                                   "all-gather  f32[8,10] -> f32[32,10]",
                                   "all-reduce  f32[] -> f32[]",
                                   "all-reduce  f32[10] -> f32[10]",
                                   "all-gather  f32[8,10] -> f32[32,10]",
                                   "reduce-scatter  f32[32,10] -> f32[8,10]",
                                   "reduce-scatter  f32[32] -> f32[8]",
                                   "reduce-scatter  f32[16,32] -> f32[4,32]",
                               }));
  // Each device holds a quarter of every split leaf: parameters and Adam's two moments.
  EXPECT_THAT(dump, HasSubstr("input 0  f32[32]  P('data',)  block [8]"));
}

}  // namespace
}  // namespace pmap_engine
