// The rules of the framework defaults (compare/src/default_rules.h) on real runs: ddp_ref with
// PyTorch's setting against the engine with Flax's or Optax's, each the same case otherwise.
// Every rule names its item first with the figures it solved for, and stays silent on the
// equivalent pair and on the other rules' pairs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "parity/compare/compare.h"
#include "default_rule_checks.h"
#include "real_runs.h"

namespace parity::compare {
namespace {

using ::testing::HasSubstr;

// A small convolutional model with one BatchNorm, on 2 replicas x 8 samples for 2 steps, with
// tensors at both: the layered case the initialiser and momentum rules read.
std::string small_conv_case(double momentum) {
  return fmt::format(
      "cnn-fmnist --set parallel.replicas=2 --set data.per_replica_batch=8 --set train.steps=2 "
      "--set 'train.record_steps=[0, 1]' --set 'model.layers=[{{kind=\"conv\", features=8, "
      "kernel=[3, 3], padding=\"SAME\", use_bias=false}}, {{kind=\"batch_norm\", "
      "momentum={}, epsilon=1e-5}}, {{kind=\"relu\"}}, {{kind=\"global_avg_pool\"}}, "
      "{{kind=\"dense\", features=10}}]'",
      momentum);
}

// The same small case with the model `layers` (a TOML array of inline tables).
std::string small_case_with(const std::string& layers) {
  return fmt::format(
      "cnn-fmnist --set parallel.replicas=2 --set data.per_replica_batch=8 --set train.steps=2 "
      "--set 'train.record_steps=[0, 1]' --set 'model.layers={}'",
      layers);
}

ComparisonResult compare(const std::filesystem::path& a, const std::filesystem::path& b) {
  return compare_run_dirs(a, b, CompareOptions{});
}

std::filesystem::path decay_run(const std::string& name, const std::string& subcommand,
                                const std::string& optimizer, double weight_decay) {
  return testing::shared_run(name, subcommand,
                             fmt::format("--set train.optimizer={} --set train.weight_decay={}",
                                         optimizer, weight_decay));
}

// torch.optim.Adam(weight_decay) adds lambda theta to the gradient (torch/optim/adam.py,
// _single_tensor_adam: grad = grad.add(param, alpha=weight_decay)); optax.adamw adds it to the
// update after Adam's normalisation (optax/_src/alias.py adamw: add_decayed_weights after
// scale_by_adam). The rule recovers lambda from the update difference, within the 10% its
// theta_0 estimate allows.
TEST(DefaultRules, TorchAdamWeightDecayAgainstOptaxAdamwIsM6) {
  const auto engine = decay_run("pmap-adamw-0.01", "pmap", "adamw", 0.01);
  const auto ddp = decay_run("ddp-adam-l2-0.01", "ddp", "adam", 0.01);
  const ComparisonResult result = compare(engine, ddp);
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  EXPECT_EQ(matching(engine, ddp), Ids{"M6"});
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "M6");
  EXPECT_NEAR(number_after(result.diagnoses.front().evidence, "lambda = "), 0.01, 0.001);
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("optax.add_decayed_weights"));
}

// PyTorch's AdamW defaults to weight_decay=1e-2 (torch/optim/adamw.py, AdamW.__init__), optax's
// adamw to 1e-4 (optax/_src/alias.py, adamw): the update differs by -lr (1e-4 - 1e-2) theta.
TEST(DefaultRules, AdamwDefaultDecaysOfTheTwoFrameworksAreM7) {
  const auto engine = decay_run("pmap-adamw-1e-4", "pmap", "adamw", 1e-4);
  const auto ddp = decay_run("ddp-adamw-0.01", "ddp", "adamw", 0.01);
  const ComparisonResult result = compare(engine, ddp);
  EXPECT_EQ(matching(engine, ddp), Ids{"M7"});
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "M7");
  EXPECT_NEAR(number_after(result.diagnoses.front().evidence, "lambda_A - lambda_B = "),
              1e-4 - 1e-2, 0.03 * 1e-2);
}

// Flax's BatchNorm momentum 0.99 weighs each batch by 0.01 (flax/linen/normalization.py,
// BatchNorm: ra = momentum ra + (1 - momentum) batch); PyTorch's default momentum=0.1 weighs it
// by 0.1 (torch/nn/modules/batchnorm.py), the case's Flax-convention 0.9. The rule solves both
// weights from steps 0 and 1.
TEST(DefaultRules, FlaxMomentumDefaultAgainstTorchsIsM2WithBothWeights) {
  const auto engine = testing::shared_run("pmap-bn-0.99", "pmap", "", 0, small_conv_case(0.99));
  const auto ddp = testing::shared_run("ddp-bn-0.9", "ddp", "", 0, small_conv_case(0.9));
  const ComparisonResult result = compare(engine, ddp);
  EXPECT_EQ(matching(engine, ddp), Ids{"M2"});
  ASSERT_FALSE(result.diagnoses.empty());
  const Diagnosis& diagnosis = result.diagnoses.front();
  EXPECT_EQ(diagnosis.pitfall, "M2");
  EXPECT_NEAR(number_after(diagnosis.evidence, "running means are "), 0.1, 1e-3);
  EXPECT_NEAR(number_after(diagnosis.evidence, "A's weight is "), 0.01, 1e-4);
  EXPECT_NEAR(number_after(diagnosis.evidence, "), B's "), 0.1, 1e-3);
}

// jax.nn.gelu defaults to approximate=True (jax/_src/nn/functions.py, gelu), torch.nn.GELU to
// approximate='none' (torch/nn/modules/activation.py): the first layer output that parts is the
// gelu's, its input agreeing, and each run's outputs are one form to float rounding.
TEST(DefaultRules, TanhGeluAgainstExactGeluIsM4) {
  const auto model = [](bool approximate) {
    return small_case_with(fmt::format(
        "[{{kind=\"flatten\"}}, {{kind=\"dense\", features=32}}, {{kind=\"gelu\", "
        "approximate={}}}, {{kind=\"dense\", features=10}}]",
        approximate));
  };
  const auto engine = testing::shared_run("pmap-gelu-tanh", "pmap", "", 0, model(true));
  const auto ddp = testing::shared_run("ddp-gelu-erf", "ddp", "", 0, model(false));
  EXPECT_EQ(matching(engine, ddp), Ids{"M4"});
  const ComparisonResult result = compare(engine, ddp);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "M4");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("is 02_gelu (a gelu)"));
  EXPECT_THAT(result.diagnoses.front().evidence,
              HasSubstr("A computes jax.nn.gelu's tanh form (max deviation"));
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("B the exact erf form"));
}

// flax.linen.LayerNorm's epsilon defaults to 1e-6 (flax/linen/normalization.py), torch's
// nn.LayerNorm eps to 1e-5 (torch/nn/modules/normalization.py): the rows' factors give
// eps_B - eps_A = 1e-5 - 1e-6. The rows' means are small against their spread, so the
// variance formula's rule (M14), which reads the same layer first, stays silent.
TEST(DefaultRules, LayerNormEpsilonsOfTheTwoFrameworksAreM5) {
  const auto model = [](double epsilon) {
    return small_case_with(fmt::format(
        "[{{kind=\"flatten\"}}, {{kind=\"dense\", features=32}}, {{kind=\"layer_norm\", "
        "epsilon={}}}, {{kind=\"relu\"}}, {{kind=\"dense\", features=10}}]",
        epsilon));
  };
  const auto engine = testing::shared_run("pmap-layer-norm-1e-6", "pmap", "", 0, model(1e-6));
  const auto ddp = testing::shared_run("ddp-layer-norm-1e-5", "ddp", "", 0, model(1e-5));
  EXPECT_EQ(matching(engine, ddp), Ids{"M5"});
  const ComparisonResult result = compare(engine, ddp);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "M5");
  EXPECT_NEAR(number_after(result.diagnoses.front().evidence, "eps_B - eps_A = "), 9e-6, 2e-7);
}

// flax.linen.BatchNorm's use_fast_variance defaults to True (flax/linen/normalization.py,
// _compute_stats: E[x^2] - E[x]^2), torch's batch_norm computes E[(x - E[x])^2]. On flat pixels
// shifted by 4 (case M14's inputs) each pixel's |mean| is 4 to 5 against a std of at most about
// 0.5, and far more where a pixel is rarely lit, so the one-pass variance errs by at least
// 2^-24 * 8^2 = 4e-6 of itself and the first BatchNorm's output parts from identical inputs.
// The negative control (the engine's two-pass form, equivalent) is case M14's swap in
// tests/cli/migration_defaults_test.cpp: on this smaller batch (8 a replica) the rarely lit
// pixels part the two two-pass forms too.
std::string uncentred_batch_norm_case(bool use_fast_variance) {
  return small_case_with(fmt::format(
             "[{{kind=\"batch_norm\", momentum=0.9, epsilon=1e-5, use_fast_variance={}}}, "
             "{{kind=\"dense\", features=10}}]",
             use_fast_variance)) +
         " --set 'model.input=[784]' --set data.feature_offset=4";
}

TEST(DefaultRules, OnePassVarianceOnUncentredInputsIsM14) {
  const auto ddp = testing::shared_run("ddp-bn-offset-4", "ddp", "", 0,
                                       uncentred_batch_norm_case(false));
  const auto fast = testing::shared_run("pmap-bn-offset-4-fast", "pmap", "", 0,
                                        uncentred_batch_norm_case(true));
  EXPECT_EQ(matching(fast, ddp), Ids{"M14"});
  const ComparisonResult result = compare(fast, ddp);
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  ASSERT_FALSE(result.diagnoses.empty());
  const Diagnosis& diagnosis = result.diagnoses.front();
  EXPECT_EQ(diagnosis.pitfall, "M14");
  EXPECT_THAT(diagnosis.evidence, HasSubstr("is 00_batch_norm (a batch_norm)"));
  EXPECT_GE(number_after(diagnosis.evidence, "the input's |mean| is "), 10);
  EXPECT_THAT(diagnosis.fix, HasSubstr("nn.BatchNorm(use_fast_variance=False)"));
}

// nn.Dense/nn.Conv's lecun_normal (flax/linen/linear.py default_kernel_init) against
// nn.Linear/nn.Conv2d's kaiming_uniform(a=sqrt(5)) (torch/nn/modules/linear.py,
// reset_parameters): std x sqrt(fan_in) 1 against 1/sqrt(3), whichever model.
TEST(DefaultRules, FlaxAndPyTorchInitialisersAreM1) {
  const auto engine = testing::shared_run("pmap-bn-0.9", "pmap", "", 0, small_conv_case(0.9));
  const auto ddp = testing::shared_run("ddp-bn-0.9-torch-init", "ddp", "--set init.scheme=torch",
                                       0, small_conv_case(0.9));
  const ComparisonResult result = compare(engine, ddp);
  EXPECT_EQ(matching(engine, ddp), Ids{"M1"});
  ASSERT_FALSE(result.diagnoses.empty());
  const Diagnosis& diagnosis = result.diagnoses.front();
  EXPECT_EQ(diagnosis.pitfall, "M1");
  EXPECT_NEAR(number_after(diagnosis.evidence, "kernels, is "), 1.0, 0.1);
  EXPECT_NEAR(number_after(diagnosis.evidence, "in A (Flax's lecun_normal gives 1) and "),
              1 / std::sqrt(3.0), 0.06);
}

// The negative controls: the same settings on both sides (SGD with momentum, equivalent in both
// frameworks, migration-defaults item 20; and the layered case) trigger no rule, and so does a
// pair that differs in something else (Adam's eps inside the square root).
TEST(DefaultRules, EquivalentPairsAndOtherCausesTriggerNoDefaultRule) {
  const std::string sgd = "--set train.optimizer=sgd --set train.momentum=0.9 --set train.lr=0.01";
  const auto engine_sgd = testing::shared_run("pmap-sgd-momentum", "pmap", sgd);
  const auto ddp_sgd = testing::shared_run("ddp-sgd-momentum", "ddp", sgd);
  const ComparisonResult sgd_pair = compare(engine_sgd, ddp_sgd);
  EXPECT_EQ(sgd_pair.verdict, Verdict::kEquivalent);
  EXPECT_TRUE(sgd_pair.diagnoses.empty());
  EXPECT_EQ(matching(engine_sgd, ddp_sgd), Ids{});

  EXPECT_EQ(matching(testing::eps_inside_sqrt_run(), testing::ddp_run()), Ids{});
  EXPECT_EQ(matching(testing::other_init_run(), testing::ddp_run()), Ids{});
  const ComparisonResult eps = compare(testing::eps_inside_sqrt_run(), testing::ddp_run());
  ASSERT_FALSE(eps.diagnoses.empty());
  EXPECT_EQ(eps.diagnoses.front().pitfall, "S1");
}

}  // namespace
}  // namespace parity::compare
