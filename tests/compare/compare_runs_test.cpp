// compare_runs on real runs made by the real `parity` binary (real_runs.h): DDP against pmap with
// pmean (equivalent), with psum (pitfall P2), a run against itself, a run that stopped on a NaN
// loss, a run from other initial parameters, the oracle hook, the informational checks, and
// malformed run directories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "parity/common/error.h"
#include "parity/compare/compare.h"
#include "real_runs.h"
#include "result_lookup.h"
#include "test_files.h"

namespace parity::compare {
namespace {

using testing::all_details;
using testing::figure;
using testing::find_check;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(CompareRuns, DdpAndPmapWithPmeanAreEquivalent) {
  const ComparisonResult result =
      compare_run_dirs(testing::pmap_run(), testing::ddp_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kEquivalent) << result.headline;
  EXPECT_EQ(exit_code(result.verdict), 0);
  EXPECT_THAT(result.headline, StartsWith("Equivalent"));
  EXPECT_TRUE(result.diagnoses.empty());

  const Check& loss = find_check(result, "loss_curve");
  EXPECT_EQ(loss.status, CheckStatus::kPass) << loss.summary;
  EXPECT_EQ(figure(loss, "steps_compared"), 10);
  EXPECT_GT(figure(loss, "max_abs_error"), 0);  // two engines, two reduction orders
  EXPECT_LT(figure(loss, "max_abs_error"), 1e-5);
  EXPECT_LT(figure(loss, "max_replica_abs_error"), 1e-5);

  const Check& gradients = find_check(result, "gradients");
  EXPECT_EQ(gradients.status, CheckStatus::kPass) << gradients.summary;
  EXPECT_EQ(figure(gradients, "tensors_compared"), 12);  // 4 tensors at steps 0, 3, 9
  EXPECT_NEAR(figure(gradients, "global_norm_ratio"), 1, 1e-5);
  EXPECT_EQ(gradients.tensors.size(), 12u);
  EXPECT_EQ(find_check(result, "parameters").status, CheckStatus::kPass);
  EXPECT_EQ(find_check(result, "replicas").status, CheckStatus::kPass);
  EXPECT_EQ(find_check(result, "data").status, CheckStatus::kPass);
  EXPECT_EQ(find_check(result, "case").status, CheckStatus::kPass);
  EXPECT_EQ(find_check(result, "rng").status, CheckStatus::kNotRecorded);
  const Check& oracle = find_check(result, "oracle");
  EXPECT_EQ(oracle.status, CheckStatus::kNotRecorded);
  EXPECT_THAT(oracle.summary, HasSubstr("not requested"));

  EXPECT_EQ(result.a.producer, "pmap_engine");
  EXPECT_EQ(result.b.producer, "ddp_ref");
  EXPECT_EQ(result.a.replicas, 8);
  EXPECT_EQ(result.a.steps, 10);
  EXPECT_EQ(result.series.steps.size(), 10u);
  EXPECT_EQ(result.series.grad_norm_ratio.size(), 10u);
  EXPECT_EQ(result.loss_tolerance.rtol, 1.3e-6);
  EXPECT_EQ(result.loss_tolerance.allowed_bad_steps, 0);
  EXPECT_THAT(result.loss_tolerance.source, HasSubstr("assert_close"));
}

TEST(CompareRuns, RunComparedWithItselfHasZeroError) {
  const ComparisonResult result =
      compare_run_dirs(testing::ddp_run(), testing::ddp_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kEquivalent) << result.headline;
  EXPECT_EQ(figure(find_check(result, "loss_curve"), "max_abs_error"), 0);
  for (const char* id : {"gradients", "parameters"}) {
    const Check& check = find_check(result, id);
    EXPECT_EQ(figure(check, "max_abs_error"), 0) << id;
    for (const TensorDelta& delta : check.tensors) {
      EXPECT_EQ(delta.max_abs, 0) << delta.name;
      EXPECT_EQ(delta.rel_l2, 0) << delta.name;
      EXPECT_EQ(delta.norm_ratio, 1) << delta.name;
      EXPECT_NEAR(delta.cosine, 1, 1e-12) << delta.name;
    }
  }
  EXPECT_THAT(all_details(find_check(result, "replicas")),
              HasSubstr("bit-identical across the two runs at step(s) 0, 3, 9"));
}

TEST(CompareRuns, PsumAgainstDdpIsDiagnosedAsSummedGradients) {
  const ComparisonResult result =
      compare_run_dirs(testing::psum_run(), testing::ddp_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  EXPECT_EQ(exit_code(result.verdict), 1);
  const Check& gradients = find_check(result, "gradients");
  EXPECT_EQ(gradients.status, CheckStatus::kFail);
  EXPECT_EQ(gradients.first_failing_step, 0);
  EXPECT_NEAR(figure(gradients, "global_norm_ratio"), 8, 8e-5);
  for (const TensorDelta& delta : gradients.tensors) {
    EXPECT_FALSE(delta.within_tolerance) << delta.name;
    EXPECT_NEAR(delta.norm_ratio, 8, 1e-3) << delta.name << " at step " << delta.step;
  }
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P2");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("with 8 replicas"));
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("run A's gradients are the sum"));
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("pmean"));
  EXPECT_THAT(result.headline, HasSubstr("first part at step 0"));
  EXPECT_THAT(result.headline, HasSubstr("(P2)"));
}

TEST(CompareRuns, PsumIsExactlyEightTimesPmean) {
  // Dividing by 8, a power of two, is exact: pmean * 8 == psum bit for bit, so the ratios are
  // exactly 8 (and 1/8 with the runs swapped, the sum then being run B's).
  const ComparisonResult result =
      compare_run_dirs(testing::psum_run(), testing::pmap_run(), CompareOptions{});
  const Check& gradients = find_check(result, "gradients");
  EXPECT_EQ(figure(gradients, "global_norm_ratio"), 8.0);
  for (const TensorDelta& delta : gradients.tensors) {
    if (delta.step != 0) continue;
    EXPECT_EQ(delta.norm_ratio, 8.0) << delta.name;
  }
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P2");

  const ComparisonResult swapped =
      compare_run_dirs(testing::pmap_run(), testing::psum_run(), CompareOptions{});
  EXPECT_EQ(figure(find_check(swapped, "gradients"), "global_norm_ratio"), 0.125);
  ASSERT_FALSE(swapped.diagnoses.empty());
  EXPECT_EQ(swapped.diagnoses.front().pitfall, "P2");
  EXPECT_THAT(swapped.diagnoses.front().evidence, HasSubstr("run B's gradients are the sum"));
}

// P3's two forms (000 §5.2): the loss psum'd inside grad is 8x DDP's mean loss in both. Under
// pmap psum transposes to psum, so each device's gradient is 8x its local one (not 8x the mean:
// the ratio is not 8); under shard_map with check_vma=True the replicated parameters' pvary
// transposes to psum_invariant (jax/_src/lax/parallel.py _pvary_transpose_rule at
// jax-v0.11.0), so the gradient is the sum, 8x the mean. The diagnosis says which, and its fix.
TEST(CompareRuns, ALossSummedInsideGradIsDiagnosedForPmapAndForShardMap) {
  const auto pmap_form =
      testing::shared_run("pmap-psum-loss", "pmap", "--program psum-loss-in-grad");
  const ComparisonResult under_pmap =
      compare_run_dirs(pmap_form, testing::ddp_run(), CompareOptions{});
  ASSERT_FALSE(under_pmap.diagnoses.empty());
  EXPECT_EQ(under_pmap.diagnoses.front().pitfall, "P3");
  EXPECT_THAT(under_pmap.diagnoses.front().evidence, HasSubstr("8 times its local one"));
  EXPECT_THAT(under_pmap.diagnoses.front().fix, HasSubstr("psum's transpose is psum"));

  const auto shard_map_form = testing::shared_run("pmap-psum-loss-shard-map", "pmap",
                                                  "--program psum-loss-in-grad-shard-map");
  const ComparisonResult under_shard_map =
      compare_run_dirs(shard_map_form, testing::ddp_run(), CompareOptions{});
  ASSERT_FALSE(under_shard_map.diagnoses.empty());
  EXPECT_EQ(under_shard_map.diagnoses.front().pitfall, "P3");
  EXPECT_THAT(under_shard_map.diagnoses.front().evidence,
              HasSubstr("the sum of all devices' gradients, as jax.shard_map with check_vma=True"));
  EXPECT_THAT(under_shard_map.diagnoses.front().fix, HasSubstr("jax.lax.pmean(loss_fn("));
}

TEST(CompareRuns, RunStoppedByNanLossIsIncompleteAndDiagnosedP10) {
  // ddp_ref makes rank 2's inputs NaN at step 3; the run stops there, marked incomplete.
  const auto stopped = testing::shared_run("ddp-nan-step3", "ddp", "--inject-fault 2:3:nan", 1);
  const ComparisonResult result = compare_run_dirs(stopped, testing::pmap_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kIncomplete) << result.headline;
  EXPECT_EQ(exit_code(result.verdict), 3);
  EXPECT_EQ(result.a.status, "incomplete");
  // What both recorded (steps 0-2) is still compared, and agrees.
  const Check& loss = find_check(result, "loss_curve");
  EXPECT_EQ(figure(loss, "steps_compared"), 3);
  EXPECT_EQ(figure(loss, "steps_out_of_tolerance"), 0);
  EXPECT_EQ(loss.status, CheckStatus::kWarn);  // steps 3-9 only in run B
  EXPECT_THAT(all_details(loss), HasSubstr("7 step(s) only in run B: 3, 4, 5, 6, 7 (+2 more)"));
  EXPECT_EQ(find_check(result, "throughput").status, CheckStatus::kNotRecorded);
  ASSERT_EQ(result.diagnoses.size(), 1u);
  EXPECT_EQ(result.diagnoses.front().pitfall, "P10");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("run A (ddp_ref, dtype f32), step 3"));
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("not finite on rank 2"));
  EXPECT_THAT(result.headline, StartsWith("Incomplete: run A is incomplete"));
}

TEST(CompareRuns, OtherInitialParametersDifferAtStepZero) {
  const auto other_init = testing::other_init_run();
  const ComparisonResult result =
      compare_run_dirs(other_init, testing::pmap_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  const Check& case_check = find_check(result, "case");
  EXPECT_EQ(case_check.status, CheckStatus::kWarn);
  EXPECT_THAT(case_check.summary, HasSubstr("1 key(s) differ: init.seed"));
  EXPECT_THAT(all_details(case_check), HasSubstr("init.seed: A 1, B 0"));
  EXPECT_EQ(find_check(result, "loss_curve").first_failing_step, 0);
  EXPECT_EQ(find_check(result, "data").status, CheckStatus::kPass);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().title, "Different initial parameters (or model)");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("already at step 0"));

  CompareOptions strict;
  strict.require_same_case = true;
  const ComparisonResult refused = compare_run_dirs(other_init, testing::pmap_run(), strict);
  EXPECT_EQ(find_check(refused, "case").status, CheckStatus::kFail);
}

// A real run whose sampler shuffles with another seed, as a port that seeds its own permutation
// would: every step reads other samples, and the data check names the cause before the losses.
TEST(CompareRuns, OtherShuffleSeedIsDiagnosedAsDataOrder) {
  const auto reshuffled = testing::shared_run("pmap-data-seed1", "pmap", "--set data.seed=1");
  const ComparisonResult result =
      compare_run_dirs(reshuffled, testing::ddp_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  const Check& data = find_check(result, "data");
  EXPECT_EQ(data.status, CheckStatus::kFail);
  EXPECT_EQ(data.first_failing_step, 0);
  EXPECT_EQ(figure(data, "steps_differing"), 10);
  EXPECT_THAT(all_details(find_check(result, "case")), HasSubstr("data.seed: A 1, B 0"));
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "S6");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("differ from step 0"));
}

TEST(CompareRuns, OtherAdamEpsIsDiagnosedAsOptimizerSemantics) {
  // Same data, same initial parameters, same step-0 gradients; eps 1e-3 instead of 1e-8 changes
  // Adam's first update wherever |g| is not far above 1e-3.
  const auto other_eps = testing::shared_run("pmap-eps1e-3", "pmap", "--set train.eps=1e-3");
  const ComparisonResult result = compare_run_dirs(other_eps, testing::ddp_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  EXPECT_THAT(all_details(find_check(result, "case")), HasSubstr("train.eps: A 0.001, B 1e-08"));
  EXPECT_EQ(find_check(result, "gradients").first_failing_step, 3);  // step 0 agrees
  EXPECT_EQ(find_check(result, "parameters").first_failing_step, 0);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().title, "Different optimizer semantics");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("after that step's update do not"));
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("eps"));
}

TEST(CompareRuns, AdamEpsInsideTheSqrtIsDiagnosedAsOptimizerSemantics) {
  // The engine with optax's eps_root: sqrt(nu_hat + 1e-8) + 0 instead of torch's
  // sqrt(nu_hat) + 1e-8. Step-0 gradients agree; the first update already differs wherever
  // |g| is not far above 1e-4.
  const ComparisonResult result =
      compare_run_dirs(testing::eps_inside_sqrt_run(), testing::ddp_run(), CompareOptions{});
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  EXPECT_THAT(all_details(find_check(result, "case")), HasSubstr("train.eps_root: A 1e-08, B 0"));
  EXPECT_EQ(find_check(result, "gradients").first_failing_step, 3);  // step 0 agrees
  EXPECT_EQ(find_check(result, "parameters").first_failing_step, 0);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "S1");
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("eps_root=0"));
}

TEST(CompareRuns, OracleMeasuresEachRunsErrorAgainstAThirdRun) {
  const RunDir pmap = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  // A and B themselves stand in as oracles, labelled f64 (an oracle must be more precise than
  // the runs it judges; compare reads only its dtype label and its losses).
  RunDir pmap_oracle = pmap;
  RunDir ddp_oracle = ddp;
  pmap_oracle.info.dtype = ddp_oracle.info.dtype = "f64";
  CompareOptions options;
  options.oracle = &pmap_oracle;  // A is the oracle itself: error 0, whatever B's is
  const Check passed = find_check(compare_runs(pmap, ddp, options), "oracle");
  EXPECT_EQ(passed.status, CheckStatus::kPass) << passed.summary;
  EXPECT_EQ(figure(passed, "max_loss_error_a"), 0);
  EXPECT_GT(figure(passed, "max_loss_error_b"), 0);

  // B is the oracle: err_B = 0, so with no floor any error of A's fails.
  options.oracle = &ddp_oracle;
  options.oracle_floor = 0;
  const Check failed = find_check(compare_runs(pmap, ddp, options), "oracle");
  EXPECT_EQ(failed.status, CheckStatus::kFail) << failed.summary;
  EXPECT_EQ(figure(failed, "max_loss_error_b"), 0);
  EXPECT_EQ(figure(failed, "allowed_error_a"), 0);
}

// The oracle judges the tensors all three runs recorded, as it judges losses: at each step, the
// worst of A's gradients (parameters) may be at most 2 x as far from the oracle's as B's worst.
TEST(CompareRuns, OracleJudgesEveryRecordedTensorAgainstTheReferencesDistance) {
  const RunDir pmap = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  RunDir ddp_oracle = ddp;
  ddp_oracle.info.dtype = "f64";
  CompareOptions options;
  options.oracle = &ddp_oracle;
  // B is the oracle (distance 0): A's f32 rounding stays within rtol of it.
  const Check close = find_check(compare_runs(pmap, ddp, options), "oracle");
  // 2 gradients and 2 parameters of each of the 2 layers, at steps 0, 3 and 9.
  EXPECT_EQ(figure(close, "tensors_judged"), 24);
  EXPECT_EQ(figure(close, "groups_beyond_oracle_band"), 0) << all_details(close);

  // Gradients summed over 8 devices (P2) are 8 x the oracle's: every gradient is beyond the band.
  const RunDir psum = read_run_dir(testing::psum_run());
  const Check far = find_check(compare_runs(psum, ddp, options), "oracle");
  EXPECT_EQ(far.status, CheckStatus::kFail);
  // The gradients at steps 0, 3 and 9.
  EXPECT_GE(figure(far, "groups_beyond_oracle_band"), 3);
  EXPECT_THAT(all_details(far), HasSubstr("step 0 grads: A's worst tensor"));
}

// Past the predictability horizon: where the reference itself is 0.5 or more (relative L2) from
// the oracle, a group's tensors are not judged. The P2 run stands in as the oracle: its
// gradients are 8 x the faithful ones, so B's are |g - 8g| / |8g| = 7/8 from it, past the
// horizon at every recorded step, A's too; the parameters, which Adam's normalised update
// keeps close, are still judged.
TEST(CompareRuns, OracleLeavesTensorsPastThePredictabilityHorizonToTheLoss) {
  const RunDir pmap = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  RunDir psum_oracle = read_run_dir(testing::psum_run());
  psum_oracle.info.dtype = "f64";
  CompareOptions options;
  options.oracle = &psum_oracle;
  const Check check = find_check(compare_runs(pmap, ddp, options), "oracle");
  EXPECT_EQ(figure(check, "groups_past_horizon"), 3) << all_details(check);  // steps 0, 3, 9
  EXPECT_THAT(all_details(check),
              HasSubstr("step 0 grads: past the predictability horizon, not judged: B's worst "
                        "tensor"));
  EXPECT_THAT(all_details(check), Not(HasSubstr("grads: A's worst tensor")));
  EXPECT_THAT(check.summary, HasSubstr("3 group-steps past the predictability horizon"));
}

TEST(CompareRuns, Float64OracleTrainsTheSameStepsInDoublePrecision) {
  const RunDir oracle = read_run_dir(testing::float64_run());
  const RunDir pmap = read_run_dir(testing::pmap_run());
  EXPECT_EQ(oracle.info.dtype, "f64");
  EXPECT_EQ(oracle.info.case_hash, pmap.info.case_hash);
  ASSERT_EQ(oracle.steps.size(), pmap.steps.size());
  bool any_difference = false;
  for (size_t i = 0; i < oracle.steps.size(); ++i) {
    EXPECT_EQ(oracle.steps[i].samples_digest, pmap.steps[i].samples_digest);
    // Derivation: f32 rounds each op at 6e-8 relative; ten Adam steps of a 784-256-10 MLP keep
    // the f32 loss within 1e-5 of the f64 one, where a semantic difference (P2, eps placement)
    // moves it by 1e-3 or more (the tests above).
    EXPECT_NEAR(oracle.steps[i].loss, pmap.steps[i].loss, 1e-5 * pmap.steps[i].loss) << i;
    any_difference |= oracle.steps[i].loss != pmap.steps[i].loss;
  }
  EXPECT_TRUE(any_difference) << "the f64 losses are the f32 ones: the run was not in f64";
  const SafetensorsFile tensors = read_safetensors(testing::float64_run() / "tensors" /
                                                   "step_000000.safetensors");
  EXPECT_EQ(tensors.tensors.at("params/dense0.kernel").dtype, DType::F64);
  EXPECT_EQ(tensors.tensors.at("grads/dense1.bias").dtype, DType::F64);
}

// With both losses held to zero tolerance, the two f32 runs fail the loss curve on rounding
// alone; the f64 oracle shows A is no further from exact training than B, so it is float noise.
TEST(CompareRuns, OracleAcceptsRoundingBeyondTheToleranceAsFloatNoise) {
  const RunDir pmap = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  const RunDir oracle = read_run_dir(testing::float64_run());
  CompareOptions options;
  options.loss_rtol = 0;
  options.loss_atol = 0;
  const ComparisonResult without_oracle = compare_runs(pmap, ddp, options);
  ASSERT_EQ(without_oracle.verdict, Verdict::kNotEquivalent) << without_oracle.headline;
  ASSERT_EQ(find_check(without_oracle, "loss_curve").status, CheckStatus::kFail);

  options.oracle = &oracle;
  const ComparisonResult result = compare_runs(pmap, ddp, options);
  const Check& oracle_check = find_check(result, "oracle");
  EXPECT_EQ(oracle_check.status, CheckStatus::kPass) << oracle_check.summary;
  EXPECT_GT(figure(oracle_check, "max_loss_error_a"), 0);
  EXPECT_GT(figure(oracle_check, "max_loss_error_b"), 0);
  EXPECT_EQ(result.verdict, Verdict::kEquivalent) << result.headline;
  EXPECT_THAT(result.headline, StartsWith("Equivalent within float noise"));
  const Check& loss = find_check(result, "loss_curve");
  EXPECT_EQ(loss.status, CheckStatus::kWarn);
  EXPECT_THAT(loss.summary, HasSubstr("Float noise"));
  EXPECT_TRUE(result.diagnoses.empty());
}

// Adam divides the first moment by the root of the second, so gradients 8x larger give nearly
// the same updates (only eps is not scaled): the psum run's losses stay near the oracle's. The
// gradients are still 8x the oracle's, which no rounding explains: the oracle's tensor judgement
// fails, and it excuses nothing.
TEST(CompareRuns, OracleDoesNotExcuseSummedGradients) {
  const RunDir psum = read_run_dir(testing::psum_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  const RunDir oracle = read_run_dir(testing::float64_run());
  CompareOptions options;
  options.oracle = &oracle;
  const ComparisonResult result = compare_runs(psum, ddp, options);
  // The losses stay within the oracle's band; the recorded gradients, 8 x the oracle's, do not.
  const Check& oracle_check = find_check(result, "oracle");
  EXPECT_EQ(oracle_check.status, CheckStatus::kFail);
  EXPECT_LE(figure(oracle_check, "max_loss_error_a"), figure(oracle_check, "allowed_error_a"));
  EXPECT_GT(figure(oracle_check, "groups_beyond_oracle_band"), 0);
  EXPECT_EQ(find_check(result, "gradients").status, CheckStatus::kFail);
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P2");
}

// Whatever the oracle says of the losses, an update that differs at the first step (same
// gradients, other parameters) is a difference in what the runs compute, not rounding.
TEST(CompareRuns, AnOracleWithoutTheRunsTensorsIsRefusedAndExcusesNothing) {
  const RunDir eps_inside = read_run_dir(testing::eps_inside_sqrt_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  // An oracle of losses alone cannot tell rounding from a different update: it is refused, even
  // where its losses would have let A through.
  RunDir oracle = read_run_dir(testing::float64_run());
  oracle.tensor_steps.clear();
  CompareOptions options;
  options.oracle = &oracle;
  options.oracle_factor = 1e9;
  const ComparisonResult result = compare_runs(eps_inside, ddp, options);
  const Check& oracle_check = find_check(result, "oracle");
  EXPECT_EQ(oracle_check.status, CheckStatus::kNotRecorded);
  EXPECT_THAT(oracle_check.summary, HasSubstr("Oracle refused: the oracle"));
  EXPECT_THAT(oracle_check.summary, HasSubstr("lacks the tensors both runs recorded at step(s) 0"));
  EXPECT_EQ(result.verdict, Verdict::kIncomplete) << result.headline;
  EXPECT_THAT(result.headline, HasSubstr("oracle refused"));
  EXPECT_EQ(find_check(result, "parameters").status, CheckStatus::kFail);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().title, "Different optimizer semantics");
}

// The same runs with the oracle's tensors read: A's parameters after the first update are far
// further from the f64 ones than B's rounding, so the oracle itself fails.
TEST(CompareRuns, OracleJudgingTensorsFindsADifferentFirstUpdate) {
  const RunDir eps_inside = read_run_dir(testing::eps_inside_sqrt_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  const RunDir oracle = read_run_dir(testing::float64_run());
  CompareOptions options;
  options.oracle = &oracle;
  const ComparisonResult result = compare_runs(eps_inside, ddp, options);
  const Check& oracle_check = find_check(result, "oracle");
  EXPECT_EQ(oracle_check.status, CheckStatus::kFail);
  EXPECT_THAT(all_details(oracle_check), HasSubstr("step 0 params: A's worst tensor"));
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent) << result.headline;
}

TEST(CompareRuns, OracleOfAnotherCaseIsRefusedNamingItsRunJson) {
  const RunDir pmap = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  const auto other_dir = testing::other_init_run();  // init.seed 1: another case hash
  RunDir other = read_run_dir(other_dir);
  other.info.dtype = "f64";  // precise enough; only its case is wrong
  CompareOptions options;
  options.oracle = &other;
  try {
    compare_runs(pmap, ddp, options);
    FAIL() << "an oracle of another case was accepted";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr((other_dir / "run.json").string()));
    EXPECT_THAT(error.what(), HasSubstr("the oracle trained case mlp2-fmnist"));
    EXPECT_THAT(error.what(), HasSubstr("the reference (run B) case mlp2-fmnist"));
    EXPECT_THAT(error.what(), HasSubstr("--float64"));
  }
}

// What each replica holds between steps, side by side with its ratio and run A's layout, as the
// runs recorded it; a run that did not record it leaves the sentence out and the peak judged.
TEST(CompareRuns, MemoryStatesWhatEachReplicaHoldsFromTheRuns) {
  RunDir fsdp = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  fsdp.info.parallel_style = "jit-fsdp";
  fsdp.info.memory.param_bytes_per_replica.assign(8, 101'800);
  fsdp.info.memory.optimizer_state_bytes_per_replica.assign(8, 203'604);
  fsdp.info.memory.state_layout = "jit-fsdp over 8 devices: 3 of 4 parameter leaves split";
  const Check memory = find_check(compare_runs(fsdp, ddp, CompareOptions{}), "memory");
  // (101,800 + 203,604) / (814,120 + 1,628,240) = 1 / 7.997.
  EXPECT_THAT(memory.summary,
              StartsWith("Param+optimizer bytes per device: A pmap_engine (jit-fsdp) 0.291 MiB "
                         "vs B ddp_ref (ddp) 2.33 MiB = 1/8 of B (devices: 8; A: jit-fsdp over "
                         "8 devices: 3 of 4 parameter leaves split). Largest per-replica peak"));
  EXPECT_DOUBLE_EQ(figure(memory, "state_bytes_a"), 305'404);
  EXPECT_DOUBLE_EQ(figure(memory, "state_bytes_b"), 2'442'360);
  EXPECT_THAT(all_details(memory), HasSubstr("run B (ddp_ref (ddp)) holds per replica: "
                                             "parameters 814120, 814120"));

  fsdp.info.memory.param_bytes_per_replica.clear();
  fsdp.info.memory.optimizer_state_bytes_per_replica.clear();
  const Check without = find_check(compare_runs(fsdp, ddp, CompareOptions{}), "memory");
  EXPECT_THAT(without.summary, StartsWith("Largest per-replica peak"));
  EXPECT_EQ(without.status, CheckStatus::kPass);
}

TEST(CompareRuns, ThroughputAndMemoryInformUnlessAskedToGate) {
  const RunDir pmap = read_run_dir(testing::pmap_run());
  const RunDir ddp = read_run_dir(testing::ddp_run());
  CompareOptions options;
  options.throughput_warn_ratio = 1e9;  // A can never be this much faster
  options.memory_warn_ratio = 0;        // nor this much smaller
  const ComparisonResult informed = compare_runs(pmap, ddp, options);
  const Check& throughput = find_check(informed, "throughput");
  EXPECT_EQ(throughput.status, CheckStatus::kWarn);
  EXPECT_EQ(find_check(informed, "memory").status, CheckStatus::kWarn);
  EXPECT_EQ(informed.verdict, Verdict::kEquivalent) << informed.headline;
  // Global batch 8 replicas x 64 over the steady median, as run.json records it.
  const double expected = 512 / pmap.info.timings.steady_step_median_seconds;
  EXPECT_DOUBLE_EQ(figure(throughput, "samples_per_second_a"), expected);
  EXPECT_DOUBLE_EQ(informed.a.samples_per_second, expected);
  EXPECT_DOUBLE_EQ(figure(throughput, "throughput_ratio"),
                   expected * ddp.info.timings.steady_step_median_seconds / 512);
  EXPECT_THAT(all_details(find_check(informed, "memory")), HasSubstr(pmap.info.memory.method));

  // Both producers record what each replica holds: whole copies, the same bytes but for the
  // engine's Adam step count (one i32; LibTorch counts steps in an int64_t field, not a tensor).
  EXPECT_THAT(find_check(informed, "memory").summary,
              HasSubstr("Param+optimizer bytes per device: A pmap_engine (pmap) 2.33 MiB vs B "
                        "ddp_ref (ddp) 2.33 MiB = 1x B (devices: 8; A: pmap: a full copy on "
                        "every device). Largest per-replica peak: "));

  options.fail_on_performance = true;
  const ComparisonResult gated = compare_runs(pmap, ddp, options);
  EXPECT_EQ(find_check(gated, "throughput").status, CheckStatus::kFail);
  EXPECT_EQ(gated.verdict, Verdict::kNotEquivalent);
}

class CompareRunsBadInput : public ::testing::Test {
 protected:
  std::filesystem::path broken_copy() {
    return testing::copy_run(testing::pmap_run(), dir_.path("run"));
  }
  void expect_refused(const std::filesystem::path& run, std::initializer_list<std::string> says) {
    testing::expect_input_error(
        [&] { compare_run_dirs(run, testing::ddp_run(), CompareOptions{}); }, says);
  }
  testing::TempDir dir_;
};

TEST_F(CompareRunsBadInput, MissingRunDirectory) {
  expect_refused(dir_.path("nowhere"), {"no run.json in", "nowhere"});
}

TEST_F(CompareRunsBadInput, RunJsonNotJson) {
  const auto run = broken_copy();
  testing::write_bytes(run / "run.json", "{\"format\": \"parity-run\",");
  expect_refused(run, {(run / "run.json").string(), "not valid JSON"});
}

TEST_F(CompareRunsBadInput, MetricsLineNotJson) {
  const auto run = broken_copy();
  std::string metrics = testing::read_bytes(run / "metrics.jsonl");
  const size_t third_line = metrics.find('\n', metrics.find('\n') + 1) + 1;
  metrics.insert(third_line, "{\"step\": oops}\n");
  testing::write_bytes(run / "metrics.jsonl", metrics);
  expect_refused(run, {(run / "metrics.jsonl").string(), "line 3"});
}

TEST_F(CompareRunsBadInput, TruncatedTensorFile) {
  const auto run = broken_copy();
  const auto file = run / "tensors" / "step_000003.safetensors";
  testing::write_bytes(file, testing::read_bytes(file).substr(0, 100));
  expect_refused(run, {file.string()});
}

TEST_F(CompareRunsBadInput, DigestsOfTheWrongType) {
  const auto run = broken_copy();
  testing::edit_tensors(run, 9, [](NamedTensors& tensors) {
    tensors["replicas/param_digests"] = HostTensor::zeros(DType::F32, {8});
  });
  expect_refused(run, {(run / "tensors" / "step_000009.safetensors").string(),
                       "replicas/param_digests", "expected I64 [replicas]"});
}

TEST_F(CompareRunsBadInput, UnknownDtype) {
  const auto run = broken_copy();
  std::string text = testing::read_bytes(run / "run.json");
  const std::string field = "\"dtype\": \"f32\"";
  ASSERT_NE(text.find(field), std::string::npos);
  text.replace(text.find(field), field.size(), "\"dtype\": \"f8\"");
  testing::write_bytes(run / "run.json", text);
  expect_refused(run, {(run / "run.json").string(), "unknown dtype \"f8\""});
}

}  // namespace
}  // namespace parity::compare
