// `parity run --seeds` and `parity compare --seeds` end to end on mlp-fmnist-dropout, shortened
// to 20 steps: ddp_ref's masks come from LibTorch's generator and the engine's from threefry, so
// the runs compare only over seeds. Four seeds of each producer trained from one init file:
// the same case is equivalent within the default margins (measured: test loss 0.767 against
// 0.768, 90% interval [-0.0069, 0.0066]), and the DDP learning rate raised by 20% is told apart
// (it lowers B's test loss to 0.737: difference 0.030, interval [0.023, 0.038], beyond the 0.02
// margin). Bad input exits 2.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::run_command;
using testing::shell_quote;

const std::string kParity = PARITY_EXECUTABLE;
const std::string kShortDropoutCase = "mlp-fmnist-dropout --set train.steps=20 --seeds 4";

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(testing::read_bytes(path));
}

TEST(CliRunSeeds, DropoutStreamsOfBothFrameworksAreEquivalentOverSeeds) {
  testing::TempDir out;
  const auto run = run_command(fmt::format("{} run {} --no-color --out {}", kParity,
                                           kShortDropoutCase, shell_quote(out.path().string())));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("Equivalent over 4 seeds of A and 4 of B: test loss"));
  const fs::path case_dir = out.path("mlp-fmnist-dropout");
  for (int seed = 0; seed < 4; ++seed) {
    for (const char* producer : {"pmap", "ddp"}) {
      const fs::path run_dir = case_dir / "seeds" / producer / fmt::format("seed-{}", seed);
      EXPECT_EQ(read_json(run_dir / "run.json").at("status"), "complete") << run_dir;
    }
  }
  const nlohmann::json report = read_json(case_dir / "report/report.json");
  EXPECT_EQ(report.at("verdict"), "equivalent");
  ASSERT_EQ(report.at("seeds").size(), 2u);
  for (const nlohmann::json& distribution : report.at("seeds")) {
    EXPECT_EQ(distribution.at("values_a").size(), 4u);
    EXPECT_EQ(distribution.at("values_b").size(), 4u);
    EXPECT_EQ(distribution.at("verdict"), "equivalent");
  }
  // Every seed pair's masks are independent across replicas and steps on both sides.
  for (const nlohmann::json& check : report.at("checks")) {
    if (check.at("id") == "rng") {
      EXPECT_EQ(check.at("status"), "pass") << check.dump();
    }
  }
  const std::string junit = testing::read_bytes(case_dir / "report/junit.xml");
  EXPECT_THAT(junit, HasSubstr("name=\"seeds_test_loss\""));
  EXPECT_THAT(junit, HasSubstr("name=\"seeds_test_accuracy\""));
  const std::string html = testing::read_bytes(case_dir / "report/report.html");
  EXPECT_THAT(html, HasSubstr("<h2>Over seeds</h2>"));
  EXPECT_THAT(html, HasSubstr("Test loss: difference of means, A − B (equivalent)"));

  // The same sets judged again from disk, as runs made elsewhere would be.
  const auto compared = run_command(fmt::format(
      "{} compare --seeds {} {} --no-color", kParity,
      shell_quote((case_dir / "seeds/pmap").string()), shell_quote((case_dir / "seeds/ddp").string())));
  EXPECT_EQ(compared.exit_code, 0) << compared.output;

  // A set whose runs trained different cases is bad input, named.
  const fs::path mixed = out.path("mixed");
  fs::copy(case_dir / "seeds/ddp", mixed, fs::copy_options::recursive);
  nlohmann::json info = read_json(mixed / "seed-1/run.json");
  std::string toml = info["case"]["toml"];
  const std::string lr = "lr = 0.001";
  ASSERT_NE(toml.find(lr), std::string::npos) << toml;
  info["case"]["toml"] = toml.replace(toml.find(lr), lr.size(), "lr = 0.002");
  testing::write_bytes(mixed / "seed-1/run.json", info.dump(2));
  const auto refused = run_command(fmt::format("{} compare --seeds {} {}", kParity,
                                               shell_quote((case_dir / "seeds/pmap").string()),
                                               shell_quote(mixed.string())));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("seed set B mixes cases"));
  EXPECT_THAT(refused.output, HasSubstr("train.lr: this run 0.002, seed-0 0.001"));
}

TEST(CliRunSeeds, ADdpLearningRateRaisedByTwentyPercentIsDifferent) {
  testing::TempDir out;
  const auto run = run_command(fmt::format("{} run {} --set-ddp train.lr=1.2e-3 --no-color --out {}",
                                           kParity, kShortDropoutCase,
                                           shell_quote(out.path().string())));
  ASSERT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("Different over 4 seeds of A and 4 of B: test loss"));
  EXPECT_THAT(run.output, HasSubstr("The sets' cases differ in train.lr."));
  const nlohmann::json report =
      read_json(out.path("mlp-fmnist-dropout") / "report/report.json");
  EXPECT_EQ(report.at("verdict"), "not equivalent");
  EXPECT_EQ(report.at("seeds").at(0).at("metric"), "test_loss");
  EXPECT_EQ(report.at("seeds").at(0).at("verdict"), "different");
}

TEST(CliRunSeeds, VaryingTheInitSeedGivesEachSeedItsOwnInitFile) {
  testing::TempDir out;
  const auto run = run_command(fmt::format(
      "{} run mlp-fmnist-dropout --set train.steps=2 --set 'compare.seed_keys=[\"init.seed\"]' "
      "--seeds 2 --no-color --out {}",
      kParity, shell_quote(out.path().string())));
  // Two seeds are too few to decide anything; the runs themselves are what this checks.
  ASSERT_NE(run.exit_code, 2) << run.output;
  const fs::path seeds = out.path("mlp-fmnist-dropout/seeds");
  EXPECT_FALSE(fs::exists(out.path("mlp-fmnist-dropout/init.safetensors")));
  const std::string init_0 = testing::read_bytes(seeds / "init/seed-0.safetensors");
  const std::string init_1 = testing::read_bytes(seeds / "init/seed-1.safetensors");
  EXPECT_NE(init_0, init_1);
  // Both producers of seed 1 trained from init.seed 1, with the case's dropout streams.
  for (const char* producer : {"pmap", "ddp"}) {
    const nlohmann::json info = read_json(seeds / producer / "seed-1/run.json");
    EXPECT_EQ(info.at("seed"), 1) << producer;
    EXPECT_EQ(info.at("status"), "complete") << producer;
  }
}

TEST(CliRunSeeds, BadSeedOptionsAreRefusedWithExitTwo) {
  testing::TempDir out;
  const auto one_seed = run_command(
      fmt::format("{} run mlp-fmnist-dropout --seeds 1 --out {}", kParity,
                  shell_quote(out.path().string())));
  EXPECT_EQ(one_seed.exit_code, 2) << one_seed.output;
  const auto ddp_only = run_command(
      fmt::format("{} run mlp-fmnist-dropout --set-ddp train.lr=1e-2 --out {}", kParity,
                  shell_quote(out.path().string())));
  EXPECT_EQ(ddp_only.exit_code, 2) << ddp_only.output;
  EXPECT_THAT(ddp_only.output, HasSubstr("--set-ddp needs --seeds"));
  const auto init = run_command(
      fmt::format("{} run mlp-fmnist-dropout --seeds 2 --set-ddp init.seed=3 --out {}", kParity,
                  shell_quote(out.path().string())));
  EXPECT_EQ(init.exit_code, 2) << init.output;
  EXPECT_THAT(init.output, HasSubstr("both producers start from one init file"));
  fs::create_directories(out.path("empty"));
  const auto empty = run_command(fmt::format("{} compare --seeds {} {}", kParity,
                                             shell_quote(out.path("empty").string()),
                                             shell_quote(out.path("empty").string())));
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_THAT(empty.output, HasSubstr("holds 0 run directories"));
  // A step-by-step tolerance means nothing over seeds: refused, not silently ignored.
  const auto tolerance = run_command(fmt::format("{} compare --seeds {} {} --loss-rtol 0.1",
                                                 kParity, shell_quote(out.path("empty").string()),
                                                 shell_quote(out.path("empty").string())));
  EXPECT_EQ(tolerance.exit_code, 2) << tolerance.output;
  EXPECT_THAT(tolerance.output, HasSubstr("--loss-rtol judges runs step by step, which --seeds "
                                          "does not"));
  EXPECT_THAT(tolerance.output, HasSubstr("--seeds takes --loss-margin, --accuracy-margin"));
  const auto run_tolerances = run_command(
      fmt::format("{} run mlp-fmnist-dropout --seeds 2 --tensor-atol 1 --allowed-bad-steps 3 "
                  "--out {}",
                  kParity, shell_quote(out.path().string())));
  EXPECT_EQ(run_tolerances.exit_code, 2) << run_tolerances.output;
  EXPECT_THAT(run_tolerances.output, HasSubstr("--tensor-atol, --allowed-bad-steps judge runs"));
}

}  // namespace
}  // namespace parity
