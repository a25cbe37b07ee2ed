// Damaged and incomplete run directories, done to real runs: what a hostile or careless hand
// leaves (an oracle cut short, tensor files deleted or swapped, run.json at odds with its lines,
// one speed run passed as several), each judged by the exit code and the words of the refusal.
// Every run here is small (mlp2-fmnist on 2 replicas, a few steps) so that each test stays cheap.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "command.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

const std::string kParity = PARITY_EXECUTABLE;
constexpr int kSteps = 6;  // mlp2-fmnist records tensors at steps 0 and 5

// `parity ddp CASE` (or `pmap`, with `extra` such as --float64) on 2 replicas for kSteps steps.
void train(const std::string& producer, const std::string& case_name, const fs::path& out,
           const std::string& extra = "") {
  const auto trained = testing::run_command(
      fmt::format("{} {} {} --set train.steps={} --set parallel.replicas=2 --out {} --quiet {}",
                  kParity, producer, case_name, kSteps, out.string(), extra),
      180);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
}

void edit_run_json(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json run = nlohmann::json::parse(testing::read_bytes(dir / "run.json"));
  edit(run);
  testing::write_bytes(dir / "run.json", run.dump(2));
}

// Keeps the first `lines` lines of DIR/metrics.jsonl.
void keep_lines(const fs::path& dir, int lines) {
  const std::string text = testing::read_bytes(dir / "metrics.jsonl");
  size_t end = 0;
  for (int line = 0; line < lines; ++line) end = text.find('\n', end) + 1;
  testing::write_bytes(dir / "metrics.jsonl", text.substr(0, end));
}

fs::path step_file(const fs::path& dir, int step) {
  return dir / "tensors" / fmt::format("step_{:06d}.safetensors", step);
}

testing::CommandResult run_parity(const std::string& arguments) {
  return testing::run_command(fmt::format("{} {}", kParity, arguments), 120);
}

// Two f32 runs of one case (b a copy of a) and, for the oracle tests, its f64 oracle.
class DamagedRunDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    train("ddp", "mlp2-fmnist", a());
    fs::copy(a(), b(), fs::copy_options::recursive);
  }
  void train_oracle() { train("pmap", "mlp2-fmnist", oracle(), "--float64"); }
  testing::CommandResult compare_with_oracle() {
    return run_parity(
        fmt::format("compare {} {} --oracle {}", a().string(), b().string(), oracle().string()));
  }
  testing::CommandResult compare() {
    return run_parity(fmt::format("compare {} {}", a().string(), b().string()));
  }
  fs::path a() const { return temp_.path("a"); }
  fs::path b() const { return temp_.path("b"); }
  fs::path oracle() const { return temp_.path("oracle"); }
  testing::TempDir temp_;
};

TEST_F(DamagedRunDirs, AnOracleCutToOneStepIsRefusedAsIncomplete) {
  train_oracle();
  const auto intact = compare_with_oracle();
  ASSERT_EQ(intact.exit_code, 0) << intact.output;

  keep_lines(oracle(), 1);  // run.json still says complete, promising 6 steps
  const auto compared = compare_with_oracle();
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output,
              HasSubstr("oracle refused: the oracle " + oracle().string() + " is incomplete"));
  EXPECT_THAT(compared.output, HasSubstr("metrics.jsonl holds 1 of the 6 steps it promises"));
}

TEST_F(DamagedRunDirs, AnOracleShorterThanTheRunsIsRefusedEvenWhenItsRunJsonAgrees) {
  train_oracle();
  keep_lines(oracle(), 1);
  edit_run_json(oracle(), [](auto& run) { run["steps"] = 1; });
  const auto compared = compare_with_oracle();
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("lacks 5 of the 6 steps the runs recorded (steps 1"));
}

TEST_F(DamagedRunDirs, AnOracleMarkedIncompleteIsRefused) {
  train_oracle();
  edit_run_json(oracle(), [](auto& run) {
    run["status"] = "incomplete";
    run["failure"] = "rank 1 at step 2: lost";
  });
  const auto compared = compare_with_oracle();
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("is incomplete (rank 1 at step 2: lost)"));
}

TEST_F(DamagedRunDirs, AnOracleWithoutTheTensorsTheRunsRecordedIsRefused) {
  train_oracle();
  // Complete by its own promises (a schema 2 run is not held to its case's record steps), but
  // without the last step's tensors, which both runs recorded.
  fs::remove(step_file(oracle(), kSteps - 1));
  edit_run_json(oracle(), [](auto& run) { run["schema_version"] = 2; });
  const auto compared = compare_with_oracle();
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("lacks the tensors both runs recorded at step(s) 5"));
}

TEST_F(DamagedRunDirs, ACompleteRunWithoutItsTensorsFolderIsIncomplete) {
  fs::remove_all(a() / "tensors");
  const auto compared = compare();
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output,
              HasSubstr("2 of the 2 tensor files its case's train.record_steps promise are "
                        "missing (tensors/step_000000.safetensors, "
                        "tensors/step_000005.safetensors)"));
}

TEST_F(DamagedRunDirs, ACompleteRunWithoutItsLastStepsTensorsIsIncomplete) {
  fs::remove(step_file(b(), kSteps - 1));
  const auto compared = compare();
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("1 of the 2 tensor files its case's train.record_steps "
                                         "promise is missing (tensors/step_000005.safetensors)"));
}

TEST_F(DamagedRunDirs, SwappedTensorFilesAreADamagedRun) {
  fs::rename(step_file(a(), 0), a() / "tensors" / "swap");
  fs::rename(step_file(a(), kSteps - 1), step_file(a(), 0));
  fs::rename(a() / "tensors" / "swap", step_file(a(), kSteps - 1));
  const auto compared = compare();
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr(step_file(a(), 0).string() +
                                         ": its metadata says step 5, its name step 0"));
}

TEST_F(DamagedRunDirs, MoreReplicasInRunJsonThanInTheLinesIsADamagedRun) {
  edit_run_json(a(), [](auto& run) { run["replicas"] = 4; });
  const auto compared = compare();
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("metrics.jsonl line 1: \"replica_losses\" has 2 values "
                                         "but run.json says 4 replicas"));
}

TEST_F(DamagedRunDirs, FewerStepsInRunJsonThanTheLinesIsADamagedRun) {
  edit_run_json(a(), [](auto& run) { run["steps"] = 3; });
  const auto compared = compare();
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("key \"steps\": the run promises 3 steps, but"));
  EXPECT_THAT(compared.output, HasSubstr("metrics.jsonl holds 6 (steps 0..5)"));
}

// One speed measurement must not count as several: the gate's reruns are pairs of runs of their
// own, by the baseline's and the candidate's producers.
TEST_F(DamagedRunDirs, TheSameSpeedRunThreeTimesIsRefused) {
  const auto gated = run_parity(
      fmt::format("gate --baseline {0} --candidate {1} --speed-baseline {0} {0}/. {0}/../a "
                  "--speed-candidate {1} {1} {1}",
                  a().string(), b().string()));
  EXPECT_EQ(gated.exit_code, 2) << gated.output;
  EXPECT_THAT(gated.output, HasSubstr("speed rerun " + a().string() +
                                      "/. is given twice (also as " + a().string() + ")"));
}

TEST_F(DamagedRunDirs, CopiesOfOneSpeedRunAreRefused) {
  for (const char* copy : {"a2", "a3"}) {
    fs::copy(a(), temp_.path(copy), fs::copy_options::recursive);
  }
  const auto gated = run_parity(fmt::format(
      "gate --baseline {0} --candidate {1} --speed-baseline {0} {2} {3} --speed-candidate {1} "
      "{1} {1}",
      a().string(), b().string(), temp_.path("a2").string(), temp_.path("a3").string()));
  EXPECT_EQ(gated.exit_code, 2) << gated.output;
  EXPECT_THAT(gated.output, HasSubstr("speed reruns " + a().string() + " and " +
                                      temp_.path("a2").string() + " are copies of one run"));
}

TEST_F(DamagedRunDirs, ASpeedRunOfAnotherProducerIsRefused) {
  train("pmap", "mlp2-fmnist", temp_.path("engine"));
  const auto gated = run_parity(
      fmt::format("gate --baseline {0} --candidate {1} --speed-baseline {0} --speed-candidate {2}",
                  a().string(), b().string(), temp_.path("engine").string()));
  EXPECT_EQ(gated.exit_code, 2) << gated.output;
  EXPECT_THAT(gated.output,
              HasSubstr("candidate rerun " + temp_.path("engine").string() +
                        " was made by pmap_engine, the candidate " + b().string() + " by ddp_ref"));
}

// A layers model promises its layer outputs at its first record step.
TEST(DamagedLayersRun, ACompleteRunWithoutItsLayerOutputsIsIncomplete) {
  testing::TempDir temp;
  train("ddp", "m4-gelu-approximate", temp.path("a"));
  fs::copy(temp.path("a"), temp.path("b"), fs::copy_options::recursive);
  const std::string compare =
      fmt::format("compare {} {}", temp.path("a").string(), temp.path("b").string());
  ASSERT_EQ(run_parity(compare).exit_code, 0);

  fs::remove(temp.path("b") / "tensors" / "intermediates_000000.safetensors");
  const auto compared = run_parity(compare);
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("promise is missing "
                                         "(tensors/intermediates_000000.safetensors)"));
}

}  // namespace
}  // namespace parity
