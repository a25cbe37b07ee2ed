// The RNG check and its diagnoses (P5, R1, R2) on real runs (real_runs.h: DDP and pmap on 8
// replicas, 10 steps) given dropout streams drawn with the engine's host threefry
// (pmap_engine/random.h, bit-exact with jax.random): each derivation a user might write, right
// or wrong, declared in the run's case ([rng], keys from parity::DropoutKeys), and what compare
// says of it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "parity/common/dropout_streams.h"
#include "parity/common/flax_rng.h"
#include "parity/common/rng_streams.h"
#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "pmap_engine/random.h"
#include "real_runs.h"
#include "result_lookup.h"
#include "test_files.h"

namespace parity::compare {
namespace {

namespace pr = pmap_engine::random;
using testing::all_details;
using testing::figure;
using testing::find_check;
using ::testing::HasSubstr;

constexpr int64_t kReplicas = 8;
constexpr int64_t kSteps = 10;
constexpr double kRate = 0.1;
const pr::Shape kMaskShape = {32, 64};  // a [batch, features] dropout on 32 samples

// How a user derives the key of (step, replica) from the root key, as the case's [rng] says.
// The faithful one is the default: fold_in(fold_in(root, step), axis_index).
RngSpec one_key_for_all_devices() {  // P5: fold_in(root, step) on every device
  RngSpec rng;
  rng.per_device = "none";
  return rng;
}
RngSpec one_key_for_all_steps() {  // R2: fold_in(root, axis_index) at every step
  RngSpec rng;
  rng.per_step = "none";
  return rng;
}

// bernoulli(key, keep, shape): uniform < keep, as jax.random.bernoulli draws it.
std::vector<uint8_t> draw_mask(pr::Key key, double keep) {
  const std::vector<float> u = pr::uniform(key, kMaskShape, 0.0f, 1.0f, true);
  std::vector<uint8_t> mask(u.size());
  for (size_t i = 0; i < u.size(); ++i) mask[i] = u[i] < static_cast<float>(keep);
  return mask;
}

struct Streams {
  RngSpec rng;  // the case's [rng], which the masks' keys follow
  bool record_keys = true;  // false: a generator without keys (torch's)
  double keep = 1 - kRate;  // the probability the producer actually drew with
};

// The run's recorded case with `rng` as its [rng].
void declare_rng(const std::filesystem::path& run, const RngSpec& rng) {
  testing::edit_run_json(run, [&](nlohmann::json& info) {
    CaseSpec spec = case_from_text(info["case"]["toml"].get<std::string>(), run / "run.json");
    spec.rng = rng;
    info["case"]["toml"] = spec.to_toml();
    info["case"]["hash"] = spec.hash();
  });
}

// Writes `streams` into a copy of `run` at `to`, whose case declares them: two dropout sites.
std::filesystem::path with_streams(const std::filesystem::path& run,
                                   const std::filesystem::path& to, const Streams& streams) {
  testing::copy_run(run, to);
  declare_rng(to, streams.rng);
  DropoutKeys keys(streams.rng);
  std::ofstream out(rng_streams_path(to));
  for (int64_t step = 0; step < kSteps; ++step) {
    const pr::Key step_key = keys.next_step_key(step);
    for (int64_t site = 0; site < 2; ++site) {
      const std::string path = fmt::format("Residual_{}/Dropout_0", site);
      for (int64_t replica = 0; replica < kReplicas; ++replica) {
        const pr::Key key =
            DropoutKeys::site_key(keys.device_key(step_key, replica, kReplicas), path);
        std::optional<RngKeyWords> words;
        if (streams.record_keys) words = RngKeyWords{key.hi, key.lo};
        out << mask_draw_to_json_line(
                   summarise_mask(step, replica, path, kRate, draw_mask(key, streams.keep), words))
            << '\n';
      }
    }
  }
  return to;
}

TEST(RngCheck, IndependentStreamsPassAndTheSameKeysDrawTheSameMasksInBothRuns) {
  testing::TempDir dir;
  const ComparisonResult result = compare_run_dirs(
      with_streams(testing::pmap_run(), dir.path("a"), {}),
      with_streams(testing::ddp_run(), dir.path("b"), {}), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kPass) << rng.summary << all_details(rng);
  // 10 steps x 2 sites x C(8, 2) replica pairs per run.
  EXPECT_EQ(figure(rng, "replica_pairs_compared_a"), 560);
  EXPECT_EQ(figure(rng, "identical_replica_masks_a"), 0);
  EXPECT_LT(std::abs(figure(rng, "worst_agreement_z_a")), 6);
  EXPECT_EQ(figure(rng, "masks_compared"), 160);
  EXPECT_EQ(figure(rng, "masks_equal"), 160);
  EXPECT_THAT(rng.summary, HasSubstr("bit-identical masks at all 160 draws"));
  EXPECT_EQ(figure(rng, "keys_recomputed_a"), 160);
  EXPECT_EQ(figure(rng, "key_mismatches_a"), 0);
  EXPECT_EQ(figure(rng, "key_mismatches_b"), 0);
  EXPECT_THAT(rng.summary, HasSubstr("all 160 of run A's recorded keys recomputed from its "
                                     "case's [rng] with the host threefry, each equal"));
  EXPECT_EQ(result.verdict, Verdict::kEquivalent) << result.headline;
}

// The key of step 4, replica 3 at Residual_1/Dropout_0 under the default [rng] (seed 0), from
// threefry's fold_in and Flax's make_rng word directly (not DropoutKeys): fold_in(fold_in(
// fold_in(PRNGKey(0), 4), 3), word).
pr::Key step4_replica3_residual1() {
  const pr::Key device = pr::fold_in(pr::fold_in(pr::prng_key(0), 4), 3);
  return pr::fold_in(device, flax_make_rng_data({"Residual_1", "Dropout_0"}, 1));
}

TEST(RngCheck, ARecordedKeyOtherThanTheCaseDerivesFailsNamingThePlaceAndBothKeys) {
  testing::TempDir dir;
  const auto a = with_streams(testing::pmap_run(), dir.path("a"), {});
  const pr::Key derived = step4_replica3_residual1();
  const RngKeyWords tampered{derived.hi, derived.lo ^ 1u};
  std::vector<MaskDraw> draws = read_run_dir(a).rng;
  std::ofstream out(rng_streams_path(a), std::ios::trunc);
  for (MaskDraw& draw : draws) {
    if (draw.step == 4 && draw.replica == 3 && draw.site == "Residual_1/Dropout_0") {
      ASSERT_EQ(*draw.key, (RngKeyWords{derived.hi, derived.lo}));
      draw.key = tampered;
    }
    out << mask_draw_to_json_line(draw) << '\n';
  }
  out.close();

  const ComparisonResult result = compare_run_dirs(
      a, with_streams(testing::ddp_run(), dir.path("b"), {}), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kFail);
  EXPECT_EQ(rng.first_failing_step, 4);
  EXPECT_EQ(figure(rng, "keys_recomputed_a"), 160);
  EXPECT_EQ(figure(rng, "key_mismatches_a"), 1);
  EXPECT_EQ(figure(rng, "key_mismatches_b"), 0);
  EXPECT_THAT(rng.summary, HasSubstr(fmt::format(
      "run A: at step 4, replica 3, site Residual_1/Dropout_0 the recorded key is [{}, {}], but "
      "the case's [rng] (seed 0, per_step \"fold_in\", per_device \"fold_in\") derives [{}, {}]",
      tampered[0], tampered[1], derived.hi, derived.lo)));
  EXPECT_THAT(rng.summary, HasSubstr("1 of run A's 160 recorded keys differ"));
}

TEST(RngCheck, ARunWithoutCaseTextSaysItsKeysWereNotRecomputed) {
  testing::TempDir dir;
  const auto a = with_streams(testing::pmap_run(), dir.path("a"), {});
  testing::edit_run_json(a, [](nlohmann::json& info) { info["case"]["toml"] = ""; });
  const ComparisonResult result = compare_run_dirs(
      a, with_streams(testing::ddp_run(), dir.path("b"), {}), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kPass) << rng.summary;
  EXPECT_FALSE(testing::has_figure(rng, "keys_recomputed_a"));
  EXPECT_EQ(figure(rng, "keys_recomputed_b"), 160);
  EXPECT_THAT(rng.summary, HasSubstr("run A's keys not recomputed: run A (pmap_engine) has no "
                                     "case text in run.json to derive its keys from"));
}

TEST(RngCheck, OneKeyOnEveryDeviceIsP5WithTheAgreementAsEvidence) {
  testing::TempDir dir;
  const ComparisonResult result = compare_run_dirs(
      with_streams(testing::pmap_run(), dir.path("a"), {one_key_for_all_devices()}),
      with_streams(testing::ddp_run(), dir.path("b"), {}), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kFail);
  EXPECT_EQ(rng.first_failing_step, 0);
  EXPECT_EQ(figure(rng, "identical_replica_masks_a"), 560);
  EXPECT_EQ(figure(rng, "identical_replica_masks_b"), 0);
  EXPECT_THAT(rng.summary, HasSubstr("replicas 0, 1, 2, 3, 4, 5, 6, 7 drew identical masks"));
  // The keys are what the case's faulty per_device = "none" derives.
  EXPECT_EQ(figure(rng, "keys_recomputed_a"), 160);
  EXPECT_EQ(figure(rng, "key_mismatches_a"), 0);
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "P5");
  // 0.9^2 + 0.1^2 = 0.82 for independent draws at rate 0.1.
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("where independent draws agree on 82.0%"));
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("fold_in(key, jax.lax.axis_index('data'))"));
  EXPECT_NE(result.verdict, Verdict::kEquivalent);
}

TEST(RngCheck, TheSameSeedOnEveryTorchRankIsR1) {
  testing::TempDir dir;
  const ComparisonResult result = compare_run_dirs(
      with_streams(testing::pmap_run(), dir.path("a"), {}),
      with_streams(testing::ddp_run(), dir.path("b"),
                   {one_key_for_all_devices(), /*record_keys=*/false}),
      CompareOptions{});
  EXPECT_THAT(find_check(result, "rng").summary,
              HasSubstr("run B's keys not recomputed: run B (ddp_ref) recorded no jax.random "
                        "keys with its masks"));
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "R1");
  EXPECT_THAT(result.diagnoses.front().evidence, HasSubstr("run B: at step 0"));
  EXPECT_THAT(result.diagnoses.front().fix, HasSubstr("torch.manual_seed(seed + rank)"));
}

TEST(RngCheck, AKeyReusedAcrossStepsIsR2) {
  testing::TempDir dir;
  const ComparisonResult result = compare_run_dirs(
      with_streams(testing::pmap_run(), dir.path("a"), {one_key_for_all_steps()}),
      with_streams(testing::ddp_run(), dir.path("b"), {}), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kFail);
  EXPECT_EQ(rng.first_failing_step, 1);
  // Every replica repeats both sites' masks at steps 1..9.
  EXPECT_EQ(figure(rng, "repeated_masks_a"), 8 * 2 * 9);
  EXPECT_EQ(figure(rng, "key_mismatches_a"), 0);  // per_step = "none" derives them
  ASSERT_FALSE(result.diagnoses.empty());
  EXPECT_EQ(result.diagnoses.front().pitfall, "R2");
  EXPECT_THAT(result.diagnoses.front().evidence,
              HasSubstr("replica 0 drew the same dropout mask at site Residual_0/Dropout_0 in "
                        "step 1 as in step 0"));
}

// bernoulli(key, rate) where bernoulli(key, 1 - rate) was meant: each site keeps ~10%, 0.9
// declared; the same keys now draw other masks than the other run's.
TEST(RngCheck, AKeepRateOffTheDeclaredRateAndSameKeyMismatchesFail) {
  testing::TempDir dir;
  Streams swapped;
  swapped.keep = kRate;
  const ComparisonResult result = compare_run_dirs(
      with_streams(testing::pmap_run(), dir.path("a"), swapped),
      with_streams(testing::ddp_run(), dir.path("b"), {}), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kFail);
  EXPECT_THAT(all_details(rng), HasSubstr("run A: site Residual_0/Dropout_0 kept 0.09"));
  EXPECT_THAT(all_details(rng), HasSubstr("rate 0.1 keeps 0.9000"));
  EXPECT_THAT(all_details(rng), HasSubstr("both runs drew from key"));
  EXPECT_EQ(figure(rng, "masks_equal"), 0);
}

TEST(RngCheck, RunsWithoutDropoutSayWhyThereIsNothingToCompare) {
  const ComparisonResult result =
      compare_run_dirs(testing::pmap_run(), testing::ddp_run(), CompareOptions{});
  const Check& rng = find_check(result, "rng");
  EXPECT_EQ(rng.status, CheckStatus::kNotRecorded);
  EXPECT_THAT(rng.summary, HasSubstr("run A (pmap_engine) drew no random numbers in training: "
                                     "its model has no dropout with a rate above 0"));
}

}  // namespace
}  // namespace parity::compare
