// M9 and M10 (compare/src/optimizer_default_rules.cpp) on real runs of mlp2-fmnist: ddp_ref with
// torch.optim's RMSprop or Adagrad defaults against the engine with optax's, the same case
// otherwise. Each rule solves what the runs' second updates were divided by, names its item
// first, and stays silent on the pairs that agree or differ in something else.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parity/compare/compare.h"
#include "default_rule_checks.h"
#include "real_runs.h"

namespace parity::compare {
namespace {

using ::testing::HasSubstr;
// Three steps with tensors at steps 0 and 1, the two updates the rules read.
const std::string kSteps = "--set train.steps=3 --set 'train.record_steps=[0, 1]' ";

std::filesystem::path run(const std::string& name, const std::string& subcommand,
                          const std::string& options) {
  return testing::shared_run(name, subcommand, kSteps + options);
}

// The first diagnosis of the pair, after checking that `id`'s rule alone matches it on its own
// and that diagnose() names it first.
Diagnosis diagnosis_of(const std::filesystem::path& engine, const std::filesystem::path& ddp,
                       const std::string& id) {
  EXPECT_EQ(matching(engine, ddp), Ids{id});
  const ComparisonResult result = compare_run_dirs(engine, ddp, CompareOptions{});
  EXPECT_FALSE(result.diagnoses.empty());
  if (result.diagnoses.empty()) return {};
  EXPECT_EQ(result.diagnoses.front().pitfall, id);
  return result.diagnoses.front();
}

// torch.optim.RMSprop(alpha=0.99, eps=1e-8 after the root: torch/optim/rmsprop.py)
const std::string kTorchRmsprop =
    "--set train.optimizer=rmsprop --set train.lr=1e-3 --set train.rms_decay=0.99";
// torch.optim.Adagrad(initial_accumulator_value=0, eps=1e-10: torch/optim/adagrad.py)
const std::string kTorchAdagrad =
    "--set train.optimizer=adagrad --set train.lr=1e-2 --set train.eps=1e-10";

// optax.rmsprop's defaults (optax/_src/alias.py: decay 0.9, eps 1e-8 inside the root) against
// torch's: the rule solves both decays and finds the floor eps on the engine's side alone.
TEST(OptimizerDefaultRules, OptaxRmspropDefaultsAgainstTorchsAreM9) {
  const auto engine =
      run("pmap-rmsprop-optax", "pmap",
          kTorchRmsprop + " --set train.rms_decay=0.9 --set train.eps_in_sqrt=true");
  const auto ddp = run("ddp-rmsprop-torch", "ddp", kTorchRmsprop);
  const Diagnosis diagnosis = diagnosis_of(engine, ddp, "M9");
  EXPECT_NEAR(number_after(diagnosis.evidence, "A decay "), 0.9, 0.002);
  EXPECT_NEAR(number_after(diagnosis.evidence, "B decay "), 0.99, 0.0005);
  EXPECT_NEAR(number_after(diagnosis.evidence, "a floor c = "), 1e-8, 2e-9);
  EXPECT_THAT(diagnosis.evidence, HasSubstr("B decay 0.9900 with no floor inside the root"));
  EXPECT_THAT(diagnosis.fix, HasSubstr("eps_in_sqrt=False"));
}

// optax.adagrad's defaults (initial_accumulator_value 0.1, eps 1e-7 inside the root) against
// torch's: the floor 0.1 + 1e-7 on the engine's side, none on ddp_ref's.
TEST(OptimizerDefaultRules, OptaxAdagradDefaultsAgainstTorchsAreM10) {
  const auto engine = run("pmap-adagrad-optax", "pmap",
                          kTorchAdagrad +
                              " --set train.initial_accumulator_value=0.1 --set train.eps=1e-7 "
                              "--set train.eps_in_sqrt=true");
  const auto ddp = run("ddp-adagrad-torch", "ddp", kTorchAdagrad);
  const Diagnosis diagnosis = diagnosis_of(engine, ddp, "M10");
  EXPECT_NEAR(number_after(diagnosis.evidence, "A with a floor c = "), 0.1, 0.001);
  EXPECT_THAT(diagnosis.evidence, HasSubstr("B with no floor inside the root"));
  EXPECT_THAT(diagnosis.fix, HasSubstr("initial_accumulator_value=0.0"));
}

// The engine in torch's convention trains ddp_ref's case: equivalent, no rule. A pair that
// differs in the optimizer itself (plain SGD against Adagrad, whose denominators do not depend
// on the gradient) is not one of these defaults either.
TEST(OptimizerDefaultRules, SameConventionsAndOtherOptimizersTriggerNeither) {
  const auto engine_rmsprop = run("pmap-rmsprop-torch", "pmap", kTorchRmsprop);
  const auto ddp_rmsprop = run("ddp-rmsprop-torch", "ddp", kTorchRmsprop);
  const ComparisonResult rmsprop = compare_run_dirs(engine_rmsprop, ddp_rmsprop, CompareOptions{});
  EXPECT_EQ(rmsprop.verdict, Verdict::kEquivalent);
  EXPECT_EQ(matching(engine_rmsprop, ddp_rmsprop), Ids{});

  // Not asserted equivalent: torch's eps 1e-10 makes lr g / (|g| + eps) hang on the last bits of
  // a gradient near 1e-10, and here one element of dense0.kernel's 200,704 has one (the two
  // reduction orders round it apart, and its update differs by a tenth of lr).
  const auto engine_adagrad = run("pmap-adagrad-torch", "pmap", kTorchAdagrad);
  const auto ddp_adagrad = run("ddp-adagrad-torch", "ddp", kTorchAdagrad);
  EXPECT_EQ(matching(engine_adagrad, ddp_adagrad), Ids{});

  const auto engine_sgd =
      run("pmap-sgd-lr-1e-2", "pmap", "--set train.optimizer=sgd --set train.lr=1e-2");
  EXPECT_EQ(matching(engine_sgd, ddp_adagrad), Ids{});
}

}  // namespace
}  // namespace parity::compare
