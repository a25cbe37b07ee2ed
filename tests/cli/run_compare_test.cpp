// `parity run` and `parity compare` as CI meets them: the main job end to end on a short
// mlp2-fmnist, the four reports on disk, the job summary, and the exit codes of the verdicts
// (0 equivalent, 1 not, 2 bad input, 3 incomplete).
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
using ::testing::Not;
using testing::run_command;
using testing::shell_quote;

const std::string kParity = PARITY_EXECUTABLE;
// Short enough for a test, long enough that Adam's updates have compounded for a few steps.
const std::string kShortCase = "--set train.steps=6 --set 'train.record_steps=[0, 5]'";

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(testing::read_bytes(path));
}

void expect_four_reports(const fs::path& report_dir, const std::string& verdict) {
  for (const char* file : {"report.html", "report.md", "report.json", "junit.xml"}) {
    EXPECT_TRUE(fs::is_regular_file(report_dir / file)) << report_dir / file;
  }
  EXPECT_EQ(read_json(report_dir / "report.json").at("verdict"), verdict);
}

TEST(CliRun, TrainsBothProducersComparesAndWritesTheReports) {
  testing::TempDir out;
  const auto run = run_command(fmt::format("{} run {} --oracle --out {}", kParity, kShortCase,
                                           shell_quote(out.path().string())));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path case_dir = out.path("mlp2-fmnist");  // the default case
  for (const char* part : {"init.safetensors", "ddp/run.json", "pmap/run.json", "oracle/run.json"}) {
    EXPECT_TRUE(fs::exists(case_dir / part)) << part;
  }
  expect_four_reports(case_dir / "report", "equivalent");
  EXPECT_EQ(read_json(case_dir / "oracle/run.json").at("dtype"), "f64");
  EXPECT_THAT(run.output, HasSubstr("parity run mlp2-fmnist: float64 oracle, 8 devices"));
  EXPECT_THAT(run.output, HasSubstr("parity: EQUIVALENT"));
  EXPECT_THAT(run.output, HasSubstr("report: " + (case_dir / "report/report.html").string()));
  // Not a terminal: progress comes as plain lines, not a redrawn bar.
  EXPECT_THAT(run.output, HasSubstr("parity run mlp2-fmnist: pmap_engine, 8 devices"));
  EXPECT_THAT(run.output, Not(HasSubstr("\r")));

  // The same two runs through `parity compare`, with the job summary CI gives.
  const fs::path summary = out.path("step-summary.md");
  testing::write_bytes(summary, "earlier step's summary\n");
  const auto compared = run_command(fmt::format(
      "GITHUB_STEP_SUMMARY={} {} compare {} {} --oracle {} --report {}",
      shell_quote(summary.string()), kParity, shell_quote((case_dir / "pmap").string()),
      shell_quote((case_dir / "ddp").string()), shell_quote((case_dir / "oracle").string()),
      shell_quote(out.path("report").string())));
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  expect_four_reports(out.path("report"), "equivalent");
  EXPECT_THAT(compared.output, HasSubstr("Oracle               pass"));
  const std::string appended = testing::read_bytes(summary);
  EXPECT_THAT(appended, HasSubstr("earlier step's summary\n"));  // appended, not replaced
  EXPECT_THAT(appended, HasSubstr("parity: equivalent"));
}

// Mixed precision on both producers (seed 002 §3.4: params and inputs cast to bf16, the loss
// cast back to f32). ddp_ref's bf16 matmul goes through oneDNN, which allocates with
// raw_allocate: the counting allocator must support it (it once failed an internal assert).
// The losses agree within assert_close's bf16 tolerance; the element-wise tensor checks do not
// (Adam moves parameters with near-zero bf16 gradients by up to 2 lr), so the verdict is 1.
TEST(CliRun, Bf16TrainsOnBothProducersAndTheLossesAgreeWithinBf16Tolerance) {
  testing::TempDir out;
  const auto run = run_command(fmt::format(
      "{} run --set train.dtype=bf16 --set train.steps=3 --set 'train.record_steps=[0]' --out {}",
      kParity, shell_quote(out.path().string())));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const nlohmann::json report = read_json(out.path("mlp2-fmnist/report/report.json"));
  EXPECT_EQ(report.at("runs").at("b").at("status"), "complete");
  EXPECT_EQ(report.at("runs").at("b").at("dtype"), "bf16");
  for (const auto& check : report.at("checks")) {
    if (check.at("id") == "loss_curve") {
      EXPECT_EQ(check.at("status"), "pass") << check.dump();
    }
  }
  EXPECT_EQ(report.at("tolerances").at("loss").at("rtol"), 1.6e-2);
}

TEST(CliCompare, SummedGradientsAreNotEquivalentAndExitOne) {
  testing::TempDir out;
  const auto make = [&](const std::string& producer, const std::string& options) {
    const auto made =
        run_command(fmt::format("{} {} mlp2-fmnist {} {} --quiet --out {}", kParity, producer,
                                kShortCase, options, shell_quote(out.path(producer).string())));
    EXPECT_EQ(made.exit_code, 0) << made.output;
  };
  make("pmap", "--program psum");
  make("ddp", "");
  const auto compared = run_command(fmt::format("{} compare {} {} --no-color", kParity,
                                                shell_quote(out.path("pmap").string()),
                                                shell_quote(out.path("ddp").string())));
  EXPECT_EQ(compared.exit_code, 1) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("parity: NOT EQUIVALENT"));
  EXPECT_THAT(compared.output, HasSubstr("P2"));
}

TEST(CliCompare, RunStoppedByAFaultIsIncompleteAndExitsThree) {
  testing::TempDir out;
  const auto stopped =
      run_command(fmt::format("{} ddp mlp2-fmnist {} --inject-fault 1:2:nan "
                              "--quiet --out {}",
                              kParity, kShortCase, shell_quote(out.path("ddp").string())));
  ASSERT_EQ(stopped.exit_code, 1) << stopped.output;
  const auto compared =
      run_command(fmt::format("{} compare {} {}", kParity, shell_quote(out.path("ddp").string()),
                              shell_quote(out.path("ddp").string())));
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("incomplete"));
}

TEST(CliCompare, MissingRunDirectoryIsBadInputAndExitsTwo) {
  testing::TempDir out;
  const fs::path missing = out.path("no-such-run");
  const auto compared = run_command(fmt::format(
      "{} compare {} {}", kParity, shell_quote(missing.string()), shell_quote(missing.string())));
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr(missing.string()));
}

TEST(CliRun, CaseDdpCannotTrainIsRefusedBeforeTrainingWithExitTwo) {
  // optax's eps_root has no torch.optim counterpart: ddp_ref says so and names the fix.
  testing::TempDir out;
  const auto run = run_command(fmt::format("{} run {} --set train.eps_root=1e-8 --out {}", kParity,
                                           kShortCase, shell_quote(out.path().string())));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("train.eps_root = 1e-08 has no torch.optim equivalent"));
  EXPECT_THAT(run.output, HasSubstr("--set train.eps_root=0"));
}

}  // namespace
}  // namespace parity
