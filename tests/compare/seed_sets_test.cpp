// Comparisons over seeds (compare/seed_sets.h) on real run directories: the small mlp2-fmnist
// case of real_runs.h trained by both producers with rng.seed 0, 1 and 2 (the case has no
// dropout, so the seeds change only what the runs record of their case). The verdict tests set
// the runs' final values to chosen samples, whose test statistics are derived in each test's
// comment (Welch's t with the Student t quantiles; scipy-checked in seed_equivalence_test.cpp).
#include "parity/compare/seed_sets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parity/common/error.h"
#include "real_runs.h"
#include "result_lookup.h"
#include "test_files.h"

namespace parity::compare {
namespace {

namespace fs = std::filesystem;
using testing::figure;
using testing::find_check;
using ::testing::HasSubstr;

constexpr int kSeeds = 3;

fs::path seed_run(const std::string& producer, int seed) {
  const std::string subcommand = producer == "ddp" ? "ddp" : "pmap";
  return testing::shared_run(fmt::format("{}-rng-seed{}", producer, seed), subcommand,
                             fmt::format("--set rng.seed={}", seed));
}

// A folder with a copy of each seed's run of `producer`, as parity run --seeds lays them out.
fs::path seed_set(const fs::path& root, const std::string& producer, int seeds = kSeeds) {
  const fs::path folder = root / producer;
  fs::create_directories(folder);
  for (int seed = 0; seed < seeds; ++seed) {
    testing::copy_run(seed_run(producer, seed), folder / fmt::format("seed-{}", seed));
  }
  return folder;
}

// Sets each run's results[metric] to the next value, in the set's order.
void set_results(const fs::path& folder, const std::string& metric,
                 const std::vector<double>& values) {
  const std::vector<fs::path> runs = seed_set_runs(folder);
  ASSERT_EQ(runs.size(), values.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    testing::edit_run_json(runs[i], [&](nlohmann::json& info) {
      info["results"][metric] = values[i];
    });
  }
}

ComparisonResult compare_sets(const fs::path& a, const fs::path& b,
                              const SeedSetOptions& options = {}) {
  return compare_seed_set_dirs(seed_set_runs(a), seed_set_runs(b), options);
}

// Set A, the engine's runs, and set B, ddp_ref's, each of kSeeds seeds, in a fresh folder.
class SeedSets : public ::testing::Test {
 protected:
  testing::TempDir dir;
  const fs::path a = seed_set(dir.path(), "pmap");
  const fs::path b = seed_set(dir.path(), "ddp");
};

TEST_F(SeedSets, RealRunsOfBothProducersOverSeedsAreEquivalent) {
  const ComparisonResult result = compare_sets(a, b);
  EXPECT_EQ(result.verdict, Verdict::kEquivalent) << result.headline;
  EXPECT_EQ(find_check(result, "case").status, CheckStatus::kPass);
  // Both producers evaluated on the test set: its loss and accuracy are judged.
  ASSERT_EQ(result.seed_distributions.size(), 2u);
  EXPECT_EQ(result.seed_distributions[0].metric, "test_loss");
  EXPECT_EQ(result.seed_distributions[1].metric, "test_accuracy");
  const Check& loss = find_check(result, "seeds_test_loss");
  EXPECT_EQ(loss.status, CheckStatus::kPass);
  EXPECT_EQ(figure(loss, "seeds_a"), kSeeds);
  // Without dropout the seeds change nothing the runs compute: each producer's values are
  // constant over its seeds, and the producers differ by float rounding only.
  EXPECT_EQ(figure(loss, "sd_a"), 0);
  EXPECT_LT(std::abs(figure(loss, "difference")), 1e-4);
  EXPECT_EQ(find_check(result, "rng").status, CheckStatus::kNotRecorded);
  EXPECT_THAT(result.a.dir, HasSubstr("pmap"));
}

// A = 0.50, 0.51, 0.52 and B the same: difference 0, each sd 0.01, se = sqrt(2 * 0.01^2 / 3) =
// 0.00816 with 4 degrees of freedom; t(0.95, 4) = 2.132 gives the 90% interval +-0.0174, inside
// the default loss margin +-0.02.
TEST_F(SeedSets, SameDistributionsAreEquivalentWithinTheMargin) {
  set_results(a, "test_loss", {0.50, 0.51, 0.52});
  set_results(b, "test_loss", {0.52, 0.50, 0.51});
  const ComparisonResult result = compare_sets(a, b);
  const Check& loss = find_check(result, "seeds_test_loss");
  EXPECT_EQ(loss.status, CheckStatus::kPass) << loss.summary;
  EXPECT_NEAR(figure(loss, "interval_high"), 0.0174, 1e-4);
  EXPECT_EQ(figure(loss, "margin"), 0.02);
  EXPECT_THAT(loss.summary, HasSubstr("Equivalent within ±0.02"));
}

// B = A + 0.05: t = 0.05 / 0.00816 = 6.12 on 4 degrees of freedom, two-sided p = 0.0036 < 0.05;
// the interval [-0.0674, -0.0326] lies beyond -0.02.
TEST_F(SeedSets, AShiftBeyondTheMarginIsDifferentAndNamesTheValue) {
  set_results(a, "test_loss", {0.50, 0.51, 0.52});
  set_results(b, "test_loss", {0.55, 0.56, 0.57});
  const ComparisonResult result = compare_sets(a, b);
  EXPECT_EQ(result.verdict, Verdict::kNotEquivalent);
  const Check& loss = find_check(result, "seeds_test_loss");
  EXPECT_EQ(loss.status, CheckStatus::kFail);
  EXPECT_NEAR(figure(loss, "p_difference"), 0.0036, 1e-4);
  EXPECT_THAT(result.headline, HasSubstr("Different over 3 seeds of A and 3 of B: test loss"));
  EXPECT_EQ(result.seed_distributions[0].verdict, "different");
  EXPECT_EQ(exit_code(result.verdict), 1);
}

// B = A + 0.015: the interval -0.015 +- 0.0174 = [-0.0324, 0.0024] crosses -0.02, and t = 1.84
// on 4 degrees of freedom gives p = 0.14: neither test decides.
TEST_F(SeedSets, TooFewSeedsForTheSpreadIsInconclusiveAndSaysHowManyWould) {
  set_results(a, "test_loss", {0.50, 0.51, 0.52});
  set_results(b, "test_loss", {0.515, 0.525, 0.535});
  const ComparisonResult result = compare_sets(a, b);
  EXPECT_EQ(result.verdict, Verdict::kInconclusive);
  EXPECT_EQ(exit_code(result.verdict), 5);
  const Check& loss = find_check(result, "seeds_test_loss");
  EXPECT_EQ(loss.status, CheckStatus::kWarn);
  const auto needed = static_cast<int>(figure(loss, "seeds_needed"));
  EXPECT_GT(needed, kSeeds);
  EXPECT_THAT(result.headline,
              HasSubstr(fmt::format("About {} seeds per producer would settle it", needed)));
  EXPECT_THAT(loss.summary,
              HasSubstr(fmt::format("about {} seeds per producer would give TOST 80% power with "
                                    "these spreads: {} more",
                                    needed, needed - kSeeds)));
}

TEST_F(SeedSets, TheMarginComesFromTheOptions) {
  set_results(a, "test_loss", {0.50, 0.51, 0.52});
  set_results(b, "test_loss", {0.515, 0.525, 0.535});
  SeedSetOptions options;
  options.loss_margin = 0.05;  // the interval [-0.0324, 0.0024] lies inside +-0.05
  EXPECT_EQ(find_check(compare_sets(a, b, options), "seeds_test_loss").status,
            CheckStatus::kPass);
}

TEST(SeedSetFolders, ASetOfOneRunIsRefused) {
  testing::TempDir dir;
  const fs::path a = seed_set(dir.path(), "pmap", 1);
  try {
    seed_set_runs(a);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr(a.string()));
    EXPECT_THAT(error.what(), HasSubstr("holds 1 run directory"));
    EXPECT_THAT(error.what(), HasSubstr("at least 2 per producer"));
  }
}

TEST_F(SeedSets, ASetMixingCasesIsRefusedNamingTheRunAndTheKey) {
  // seed-2 of A is another case: the engine run with Adam's eps inside the square root.
  fs::remove_all(a / "seed-2");
  testing::copy_run(testing::eps_inside_sqrt_run(), a / "seed-2");
  try {
    compare_sets(a, b);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr((a / "seed-2" / "run.json").string()));
    EXPECT_THAT(error.what(), HasSubstr("seed set A mixes cases"));
    EXPECT_THAT(error.what(), HasSubstr("train.eps_root"));
  }
}

TEST_F(SeedSets, TwoRunsWithTheSameSeedsAreRefused) {
  testing::copy_run(a / "seed-1", a / "seed-1-again");
  try {
    compare_sets(a, b);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr("the same seeds (rng.seed = 1, data.seed = 0"));
  }
}

TEST_F(SeedSets, SetsOfDifferentCasesWarnAndNameTheKeys) {
  // B: the engine with Adam's eps inside the square root (optax's eps_root), two seeds.
  const fs::path eps_root = dir.path() / "eps-root";
  fs::create_directories(eps_root);
  for (int seed = 0; seed < 2; ++seed) {
    testing::copy_run(
        testing::shared_run(fmt::format("pmap-eps-root-rng-seed{}", seed), "pmap",
                            fmt::format("--set train.eps=0 --set train.eps_root=1e-8 "
                                        "--set rng.seed={}",
                                        seed)),
        eps_root / fmt::format("seed-{}", seed));
  }
  const ComparisonResult result = compare_sets(a, eps_root);
  const Check& same_case = find_check(result, "case");
  EXPECT_EQ(same_case.status, CheckStatus::kWarn);
  EXPECT_THAT(same_case.summary, HasSubstr("2 key(s) besides the seeds: train.eps, train.eps_root"));
  EXPECT_THAT(result.headline, HasSubstr("The sets' cases differ in train.eps, train.eps_root."));

  SeedSetOptions strict;
  strict.require_same_case = true;
  const ComparisonResult strict_result = compare_sets(a, eps_root, strict);
  EXPECT_EQ(find_check(strict_result, "case").status, CheckStatus::kFail);
  EXPECT_EQ(strict_result.verdict, Verdict::kNotEquivalent);
}

TEST_F(SeedSets, AnIncompleteRunMakesTheVerdictIncomplete) {
  testing::edit_run_json(b / "seed-2", [](nlohmann::json& info) {
    info["status"] = "incomplete";
    info["failure"] = "rank 3 died";
  });
  const ComparisonResult result = compare_sets(a, b);
  EXPECT_EQ(result.verdict, Verdict::kIncomplete);
  EXPECT_THAT(result.headline, HasSubstr("rank 3 died"));
  // The finished runs are still judged.
  EXPECT_EQ(figure(find_check(result, "seeds_test_loss"), "seeds_b"), 2);
}

TEST(SeedSetFolders, RunsAreOrderedByTheirSeedNumber) {
  testing::TempDir dir;
  const fs::path folder = dir.path() / "set";
  fs::create_directories(folder);
  for (const char* name : {"seed-10", "seed-2", "seed-1"}) {
    testing::copy_run(seed_run("pmap", 0), folder / name);
  }
  fs::create_directories(folder / "notes");  // no run.json: not a run
  const std::vector<fs::path> runs = seed_set_runs(folder);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].filename(), "seed-1");
  EXPECT_EQ(runs[1].filename(), "seed-2");
  EXPECT_EQ(runs[2].filename(), "seed-10");
}

}  // namespace
}  // namespace parity::compare
