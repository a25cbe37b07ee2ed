// The oracle's growth where the frameworks' arithmetic differs by design (compare/src/
// rounding_growth.h), from a run's case, against values derived by hand.
#include "rounding_growth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"

namespace parity::compare {
namespace {

RunDir run_of(const std::string& case_name, const std::vector<std::string>& overrides) {
  RunDir run;
  run.info.case_toml = load_case(case_name, overrides).to_toml();
  return run;
}

// Adam's corrections at step 1. float32(0.999) = 0.999000012874603271484375, so optax's
// 1 - b2 is 0.000999987125396728515625 (the subtraction is exact), 1.2874603e-5 of the true
// 0.001 below it: 216.00 f32 roundings (2^-24 each), halved through the square root, 108.00.
// float32(0.9) = 0.89999997615814208984375: 1 - b1 is off by 2.384e-7 of 0.1, 4.00 roundings.
TEST(RoundingGrowth, AdamsFirstStepIsTheF32ErrorOfOneMinusBeta2HalvedThroughTheRoot) {
  const RunDir run = run_of("mlp2-fmnist", {"train.steps=1"});
  const RoundingGrowth growth = rounding_growth(run, run);
  EXPECT_NEAR(growth.optimizer, 108.0, 0.01);
  EXPECT_EQ(growth.statistics, 1.0);  // no BatchNorm
}

TEST(RoundingGrowth, SgdAndAnUnreadableCaseGrowNothing) {
  const RunDir sgd = run_of("mlp2-fmnist", {"train.optimizer=sgd", "train.momentum=0.9"});
  EXPECT_EQ(rounding_growth(sgd, sgd).total(), 1.0);
  const RunDir imported;  // no case text
  EXPECT_EQ(rounding_growth(imported, imported).total(), 1.0);
}

// cnn-fmnist's BatchNorms: the stem's over 32 x 28 x 28 values a channel on a replica (the most;
// the second stage's over 32 x 14 x 14): sqrt(25088). The larger of the two runs' counts.
TEST(RoundingGrowth, BatchNormGrowsAsTheRootOfTheValuesOneChannelSums) {
  const RunDir cnn = run_of("cnn-fmnist", {});
  const RunDir small = run_of("cnn-fmnist", {"data.per_replica_batch=8"});
  EXPECT_NEAR(rounding_growth(cnn, cnn).statistics, std::sqrt(32.0 * 28 * 28), 1e-9);
  EXPECT_NEAR(rounding_growth(small, cnn).statistics, std::sqrt(32.0 * 28 * 28), 1e-9);
  EXPECT_EQ(rounding_growth(cnn, cnn).optimizer, 1.0);  // SGD
}

}  // namespace
}  // namespace parity::compare
