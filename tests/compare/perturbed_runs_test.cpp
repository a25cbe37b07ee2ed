// Symptoms neither producer can be asked to show on purpose (a drifting replica, a shifted data
// order, a NaN in a completed run), made by changing one thing in the files of a copy of a real
// pmap run, then compared against the real DDP run: the right check fails at the right step, and
// the diagnosis names the right pitfall.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

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

class CompareRunsPerturbed : public ::testing::Test {
 protected:
  // A copy of the pmap run to change.
  std::filesystem::path copy() { return testing::copy_run(testing::pmap_run(), dir_.path("run")); }
  ComparisonResult compare_with_ddp(const std::filesystem::path& run) {
    return compare_run_dirs(run, testing::ddp_run(), CompareOptions{});
  }
  // Flips one bit of replica `replica`'s parameter digest at `step`.
  static void corrupt_digest(const std::filesystem::path& run, int64_t step, int64_t replica) {
    testing::edit_tensors(run, step, [replica](NamedTensors& tensors) {
      tensors.at("replicas/param_digests").data_as<int64_t>()[replica] ^= 1;
    });
  }
  testing::TempDir dir_;
};

TEST_F(CompareRunsPerturbed, ReplicaDriftingAfterAnUpdateIsP11) {
  const auto run = copy();
  corrupt_digest(run, 3, 5);
  corrupt_digest(run, 9, 5);
  const ComparisonResult result = compare_with_ddp(run);
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  const Check& replicas = find_check(result, "replicas");
  EXPECT_EQ(replicas.status, CheckStatus::kFail);
  EXPECT_EQ(replicas.first_failing_step, 3);
  EXPECT_EQ(figure(replicas, "divergent_steps_a"), 2);
  EXPECT_EQ(figure(replicas, "divergent_steps_b"), 0);
  EXPECT_THAT(replicas.summary, HasSubstr("run A: at step 3, replica(s) 5 of 8 differ"));
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P11");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("replica(s) 5"));
  EXPECT_THAT(result.headline, HasSubstr("first part at step 3"));
}

TEST_F(CompareRunsPerturbed, ReplicaStartingDifferentIsP4) {
  // Replica 5 holds other parameters from the start: its digest differs at every recorded step
  // and its first loss is not the one DDP's rank 5 computed.
  const auto run = copy();
  for (int64_t step : {0, 3, 9}) corrupt_digest(run, step, 5);
  testing::edit_metrics(run, 0, [](nlohmann::json& metrics) {
    metrics["replica_losses"][5] = metrics["replica_losses"][5].get<double>() + 0.25;
  });
  const ComparisonResult result = compare_with_ddp(run);
  const Check& loss = find_check(result, "loss_curve");
  EXPECT_EQ(loss.first_failing_step, 0);
  EXPECT_THAT(all_details(loss), HasSubstr("step 0: replica 5 loss"));
  EXPECT_EQ(find_check(result, "replicas").first_failing_step, 0);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P4");
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("Initialise the parameters once"));
}

TEST_F(CompareRunsPerturbed, OtherSamplesAtStepThreeIsS6) {
  const auto run = copy();
  testing::edit_metrics(run, 3, [](nlohmann::json& metrics) {
    metrics["samples_digest"] = "0123456789abcdef";
    metrics["samples_set_digest"] = "fedcba9876543210";  // another set, not only another order
  });
  const ComparisonResult result = compare_with_ddp(run);
  const Check& data = find_check(result, "data");
  EXPECT_EQ(data.status, CheckStatus::kFail);
  EXPECT_EQ(data.first_failing_step, 3);
  EXPECT_EQ(figure(data, "steps_differing"), 1);
  EXPECT_THAT(all_details(data), HasSubstr("step 3: samples digest A 0123456789abcdef"));
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "S6");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("differ from step 3"));
}

TEST_F(CompareRunsPerturbed, RepeatedSamplesWithinAStepAreP8) {
  // From step 2, half of each global batch repeats the other half (two processes each reading
  // the whole dataset): other samples, and more repeats than DDP's none.
  const auto run = copy();
  for (int64_t step = 2; step < 10; ++step) {
    testing::edit_metrics(run, step, [](nlohmann::json& metrics) {
      metrics["samples_digest"] = "0123456789abcdef";
      metrics["samples_set_digest"] = "fedcba9876543210";
      metrics["duplicate_samples"] = 32;
    });
  }
  const ComparisonResult result = compare_with_ddp(run);
  const Check& data = find_check(result, "data");
  EXPECT_EQ(data.status, CheckStatus::kFail);
  EXPECT_THAT(all_details(data), HasSubstr("step 2: run A repeats 32 samples within its global "
                                           "batch, run B 0"));
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P8");
  EXPECT_THAT(result.diagnoses.front().evidence,
              HasSubstr("run A repeats 32 samples within the global batch of step 2"));
}

TEST_F(CompareRunsPerturbed, TheSameSamplesInAnotherAssignmentPassAndAreNamed) {
  // From step 4 the run holds each global batch in another rank-major order (as a restore on
  // another device count does), with the same set of samples.
  const auto run = copy();
  for (int64_t step = 4; step < 10; ++step) {
    testing::edit_metrics(
        run, step, [](nlohmann::json& metrics) { metrics["samples_digest"] = "0123456789abcdef"; });
  }
  const ComparisonResult result = compare_with_ddp(run);
  const Check& data = find_check(result, "data");
  EXPECT_EQ(data.status, CheckStatus::kPass);
  EXPECT_EQ(figure(data, "steps_differing"), 0);
  EXPECT_EQ(figure(data, "steps_reassigned"), 6);
  EXPECT_THAT(data.summary, HasSubstr("at 6 of them, first at step 4, the replicas hold them in "
                                      "another order or assignment"));
  EXPECT_EQ(result.verdict, Verdict::kEquivalent);
}

TEST_F(CompareRunsPerturbed, NanLossInACompletedRunIsP10Alone) {
  const auto run = copy();
  testing::edit_metrics(run, 5, [](nlohmann::json& metrics) { metrics["loss"] = "NaN"; });
  const ComparisonResult result = compare_with_ddp(run);
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  const Check& loss = find_check(result, "loss_curve");
  EXPECT_EQ(loss.status, CheckStatus::kFail);
  EXPECT_EQ(loss.first_failing_step, 5);
  EXPECT_EQ(figure(loss, "steps_out_of_tolerance"), 1);
  // Everything after the NaN is its consequence: no second cause is offered.
  ASSERT_EQ(result.diagnoses.size(), 1u);
  EXPECT_EQ(result.diagnoses.front().pitfall, "P10");
  EXPECT_THAT(result.diagnoses.front().evidence,
              HasSubstr("run A (pmap_engine, dtype f32), step 5: the loss is NaN"));
}

TEST_F(CompareRunsPerturbed, StepsRecordedByOneRunOnlyWarn) {
  const auto run = copy();
  std::string metrics = testing::read_bytes(run / "metrics.jsonl");
  for (int line = 0; line < 2; ++line) metrics.erase(metrics.rfind('\n', metrics.size() - 2) + 1);
  testing::write_bytes(run / "metrics.jsonl", metrics);
  const ComparisonResult result = compare_with_ddp(run);
  const Check& loss = find_check(result, "loss_curve");
  EXPECT_EQ(loss.status, CheckStatus::kWarn);
  EXPECT_EQ(figure(loss, "steps_compared"), 8);
  EXPECT_THAT(all_details(loss), HasSubstr("2 step(s) only in run B: 8, 9"));
  // The cut run still says "complete" but lacks 2 of the steps it promises: incomplete.
  EXPECT_EQ(result.verdict, Verdict::kIncomplete) << result.headline;
  EXPECT_THAT(result.headline, HasSubstr("metrics.jsonl holds 8 of the 10 steps it promises"));
}

TEST_F(CompareRunsPerturbed, LossBeyondTheLaneFailsWithinItWarns) {
  // Steps 2 and 6 moved by 1e-3, far outside f32's tolerance: with the default lane of 0 (10
  // steps) the curve fails at step 2; allowing 2 bad steps turns it into a warning.
  const auto run = copy();
  for (int64_t step : {2, 6}) {
    testing::edit_metrics(run, step, [](nlohmann::json& metrics) {
      metrics["loss"] = metrics["loss"].get<double>() + 1e-3;
    });
  }
  const ComparisonResult result = compare_with_ddp(run);
  const Check& strict = find_check(result, "loss_curve");
  EXPECT_EQ(strict.status, CheckStatus::kFail);
  EXPECT_EQ(strict.first_failing_step, 2);
  EXPECT_THAT(all_details(strict), HasSubstr("steps outside tolerance: 2, 6"));
  // Gradients and parameters still agree at step 0, so no semantic cause is claimed.
  ASSERT_EQ(result.diagnoses.size(), 1u);
  EXPECT_EQ(result.diagnoses.front().title, "Rounding differences grew over the steps");

  CompareOptions lane;
  lane.allowed_bad_steps = 2;
  const ComparisonResult lenient = compare_run_dirs(run, testing::ddp_run(), lane);
  const Check& loss = find_check(lenient, "loss_curve");
  EXPECT_EQ(loss.status, CheckStatus::kWarn);
  EXPECT_FALSE(loss.first_failing_step);
  EXPECT_EQ(lenient.verdict, Verdict::kEquivalent) << lenient.headline;
}

// BatchNorm statistics are model state, recorded as batch_stats/NAME and checked like parameters:
// the check appears only when a run recorded them, passes when they agree and fails at the step
// where one run's running variance is off.
TEST_F(CompareRunsPerturbed, BatchNormStatisticsAreCheckedLikeParameters) {
  const ComparisonResult mlp = compare_with_ddp(testing::pmap_run());
  EXPECT_TRUE(std::none_of(mlp.checks.begin(), mlp.checks.end(),
                           [](const Check& check) { return check.id == "model_state"; }))
      << "an MLP records no model state, and its report shows no such check";
  const auto add_statistics = [](const std::filesystem::path& run, float drift) {
    for (int64_t step : {0, 3, 9}) {
      testing::edit_tensors(run, step, [step, drift](NamedTensors& tensors) {
        const float var = step == 9 ? 0.5f + drift : 0.5f;
        tensors.emplace("batch_stats/BatchNorm_0/mean", HostTensor::from_f32({2}, {0.1f, -0.2f}));
        tensors.emplace("batch_stats/BatchNorm_0/var", HostTensor::from_f32({2}, {var, 2.0f}));
      });
    }
    return run;
  };
  const auto ddp = add_statistics(testing::copy_run(testing::ddp_run(), dir_.path("ddp")), 0);
  const ComparisonResult agreeing =
      compare_run_dirs(add_statistics(copy(), 0), ddp, CompareOptions{});
  const Check& state = find_check(agreeing, "model_state");
  EXPECT_EQ(state.status, CheckStatus::kPass) << state.summary;
  EXPECT_EQ(figure(state, "tensors_compared"), 6);  // 2 statistics at 3 steps
  EXPECT_EQ(agreeing.verdict, Verdict::kEquivalent) << agreeing.headline;

  const auto drifted = add_statistics(testing::copy_run(testing::pmap_run(), dir_.path("drift")),
                                      1e-3f);
  const ComparisonResult differing = compare_run_dirs(drifted, ddp, CompareOptions{});
  const Check& failing = find_check(differing, "model_state");
  EXPECT_EQ(failing.status, CheckStatus::kFail);
  EXPECT_EQ(failing.first_failing_step, 9);
  EXPECT_THAT(all_details(failing), HasSubstr("step 9 BatchNorm_0/var (2,): 1 of 2 elements out of tolerance"));
  EXPECT_EQ(differing.verdict, Verdict::kNotEquivalent);
}

}  // namespace
}  // namespace parity::compare
