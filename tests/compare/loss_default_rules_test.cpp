// The label smoothing rule (M11, compare/src/loss_default_rules.cpp) on real runs of the small
// mlp2-fmnist variant: the Flax examples' loss against torch's at eps = 0.2, in either order of
// the runs, solved back to eps and C; and silent where only one side smooths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parity/compare/compare.h"
#include "default_rule_checks.h"
#include "real_runs.h"

namespace parity::compare {
namespace {

using ::testing::HasSubstr;
std::filesystem::path smoothed_run(const std::string& name, const std::string& subcommand,
                                   const std::string& form) {
  return testing::shared_run(
      name, subcommand,
      "--set model.label_smoothing=0.2 --set model.label_smoothing_form=" + form);
}

TEST(LossDefaultRules, FlaxExamplesLossAgainstTorchsIsM11InEitherOrder) {
  const auto engine = smoothed_run("pmap-smoothing-flax-0.2", "pmap", "flax_examples");
  const auto ddp = smoothed_run("ddp-smoothing-uniform-0.2", "ddp", "uniform");
  for (const bool engine_first : {true, false}) {
    const auto& a = engine_first ? engine : ddp;
    const auto& b = engine_first ? ddp : engine;
    const ComparisonResult result = compare_run_dirs(a, b, CompareOptions{});
    EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
    EXPECT_EQ(matching(a, b), Ids{"M11"});
    ASSERT_FALSE(result.diagnoses.empty());
    const Diagnosis& diagnosis = result.diagnoses.front();
    EXPECT_EQ(diagnosis.pitfall, "M11");
    EXPECT_THAT(diagnosis.evidence,
                HasSubstr(engine_first ? "run B's loss lies" : "run A's loss lies"));
    // The logits' near-uniform softmax at the first step (init scale 0.01) leaves the offset
    // H(q) itself: eps solved to well within 1%.
    EXPECT_NEAR(number_after(diagnosis.evidence, "and eps = "), 0.2, 0.002);
    EXPECT_NEAR(number_after(diagnosis.evidence, "for C = "), 10, 0);
    EXPECT_THAT(diagnosis.fix, HasSubstr("nn.CrossEntropyLoss(label_smoothing=0.2)"));
    EXPECT_THAT(diagnosis.fix, HasSubstr("optax.smooth_labels"));
  }
}

// Smoothing on one side only moves the gradients by eps, not eps/C: another mistake, not M11's.
TEST(LossDefaultRules, SmoothingOnOneSideOnlyIsNotM11) {
  const auto uniform = smoothed_run("pmap-smoothing-uniform-0.2", "pmap", "uniform");
  const auto flax = smoothed_run("pmap-smoothing-flax-0.2", "pmap", "flax_examples");
  EXPECT_EQ(matching(uniform, testing::ddp_run()), Ids{});
  EXPECT_EQ(matching(flax, testing::ddp_run()), Ids{});
}

}  // namespace
}  // namespace parity::compare
