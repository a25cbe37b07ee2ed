// The default case learns what a 2-layer MLP learns on Fashion-MNIST: after one epoch
// (8 ranks x 64 = 512 samples per step; DistributedSampler gives each rank 7500 samples, i.e.
// ceil(7500 / 64) = 118 batches) the test accuracy is at least 0.82. Published baselines for
// a 256-unit MLP on Fashion-MNIST sit around 0.85-0.88 after full training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "command.h"
#include "parity/common/run_dir.h"

namespace parity {
namespace {

TEST(DdpAccuracy, Mlp2ReachesAtLeast082TestAccuracyAfterOneEpoch) {
  auto dir = testing::fresh_directory("ddp-accuracy");
  auto result = testing::run_command(fmt::format(
      "{} ddp mlp2-fmnist --set train.steps=118 --out {} --quiet", PARITY_EXECUTABLE,
      (dir / "run").string()), 600);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, ::testing::HasSubstr("test accuracy"));
  RunDir run = read_run_dir(dir / "run");
  ASSERT_EQ(run.info.status, "complete");
  ASSERT_TRUE(run.info.results.count("test_accuracy"));
  EXPECT_GE(run.info.results.at("test_accuracy"), 0.82);
  EXPECT_LT(run.steps.back().loss, run.steps.front().loss);
  EXPECT_EQ(run.info.memory.peak_bytes_per_replica.size(), 8u);
  for (int64_t peak : run.info.memory.peak_bytes_per_replica) EXPECT_GT(peak, 0);
}

}  // namespace
}  // namespace parity
