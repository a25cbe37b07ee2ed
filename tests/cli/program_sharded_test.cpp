// `parity program mlp4-1024 --sharded`: the case's jit step partitioned over its 8 devices,
// data parallel and FSDP, with the collectives the partitioner inserted, as XLA's SPMD
// partitioner inserts them for these shardings (tests/pmap_engine/sharding_propagation_test.cpp
// cites the rules). The lists are derived from the model, 784 -> 1024 -> 1024 -> 1024 -> 10,
// relu, softmax cross-entropy over the global batch of 4096, Adam, in program order.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "command.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using testing::run_command;

const std::string kParity = PARITY_EXECUTABLE;

// The "kind operand -> result" lines of each style's collective list, in order.
std::vector<std::vector<std::string>> collective_lists(const std::string& output) {
  std::vector<std::vector<std::string>> lists;
  std::istringstream in(output);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("# Collectives", 0) == 0) {
      lists.emplace_back();
      inside = true;
    } else if (inside && line.rfind("  total", 0) != 0 && line.rfind("  ", 0) == 0) {
      lists.back().push_back(line.substr(2, line.find("  [") - 2));
    } else {
      inside = false;
    }
  }
  return lists;
}

// Run once per test process, on first use.
const std::string& sharded_run() {
  static const std::string output =
      run_command(kParity + " program mlp4-1024 --sharded", 300).output;
  return output;
}

// Data parallel (params P(), batch P('data')): no communication forward; the loss and each of
// the 8 gradients are sums over the split batch, one all-reduce each, in backward order.
TEST(ProgramSharded, DataParallelAllReducesTheLossAndEveryGradient) {
  const auto lists = collective_lists(sharded_run());
  ASSERT_EQ(lists.size(), 2u) << sharded_run();
  EXPECT_EQ(lists[0], (std::vector<std::string>{
                          "all-reduce  f32[] -> f32[]",
                          "all-reduce  f32[10] -> f32[10]",
                          "all-reduce  f32[1024,10] -> f32[1024,10]",
                          "all-reduce  f32[1024] -> f32[1024]",
                          "all-reduce  f32[1024,1024] -> f32[1024,1024]",
                          "all-reduce  f32[1024] -> f32[1024]",
                          "all-reduce  f32[1024,1024] -> f32[1024,1024]",
                          "all-reduce  f32[1024] -> f32[1024]",
                          "all-reduce  f32[784,1024] -> f32[784,1024]",
                      }));
}

// FSDP (every leaf split 8 ways on its leading dim, but dense3.bias [10], which no dim of
// divides by 8): forward, each kernel and each bias's broadcast row all-gathered before use;
// backward, the kernels of layers 3, 2, 1 gathered again for the activations' cotangents, each
// split leaf's gradient reduce-scattered onto its split, dense3.bias's and the loss all-reduced.
// Layer 0's kernel needs no second gather: nothing differentiates the input.
TEST(ProgramSharded, FsdpAllGathersEachKernelAndReduceScattersEachGradient) {
  const auto lists = collective_lists(sharded_run());
  ASSERT_EQ(lists.size(), 2u) << sharded_run();
  EXPECT_EQ(lists[1], (std::vector<std::string>{
                          "all-gather  f32[98,1024] -> f32[784,1024]",
                          "all-gather  f32[1,128] -> f32[1,1024]",
                          "all-gather  f32[128,1024] -> f32[1024,1024]",
                          "all-gather  f32[1,128] -> f32[1,1024]",
                          "all-gather  f32[128,1024] -> f32[1024,1024]",
                          "all-gather  f32[1,128] -> f32[1,1024]",
                          "all-gather  f32[128,10] -> f32[1024,10]",
                          "all-reduce  f32[] -> f32[]",
                          "all-reduce  f32[10] -> f32[10]",
                          "all-gather  f32[128,10] -> f32[1024,10]",
                          "reduce-scatter  f32[1024,10] -> f32[128,10]",
                          "reduce-scatter  f32[1024] -> f32[128]",
                          "all-gather  f32[128,1024] -> f32[1024,1024]",
                          "reduce-scatter  f32[1024,1024] -> f32[128,1024]",
                          "reduce-scatter  f32[1024] -> f32[128]",
                          "all-gather  f32[128,1024] -> f32[1024,1024]",
                          "reduce-scatter  f32[1024,1024] -> f32[128,1024]",
                          "reduce-scatter  f32[1024] -> f32[128]",
                          "reduce-scatter  f32[784,1024] -> f32[98,1024]",
                      }));
}

// What each device holds between steps. The parameters are 784*1024 + 1024 + 2 * (1024*1024 +
// 1024) + 1024*10 + 10 = 2,913,290 f32, 11,653,160 bytes, a full copy on every device under
// jit-dp. Under jit-fsdp every leaf but dense3.bias is split 8 ways: 2,913,280 / 8 * 4 + 40 =
// 1,456,680 bytes. Adam's mu and nu are twice the parameters, plus its i32 count (4 bytes).
TEST(ProgramSharded, StatesWhatEachDeviceHolds) {
  EXPECT_THAT(sharded_run(), HasSubstr("parameters 1456680 bytes + optimizer state 2913364 bytes "
                                     "per device (jit-fsdp over 8 devices"));
  EXPECT_THAT(sharded_run(), HasSubstr("parameters 11653160 bytes + optimizer state 23306324 "
                                     "bytes per device (jit-dp over 8 devices"));
}

}  // namespace
}  // namespace parity
