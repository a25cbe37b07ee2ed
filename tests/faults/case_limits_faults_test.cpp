// Hostile case files given to the CLI: absurd sizes and depths in the layers form of a model,
// layer combinations the producers cannot train, a case path that is a loop of links. Each must
// be refused when the case is loaded (exit 2), naming the layer or key and the fix, before any
// producer starts. The run's wall-clock limit (run_command's timeout, and ctest's) catches a
// refusal that came too late; the tests assert the outcome.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "command.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_command;
using testing::shell_quote;

namespace fs = std::filesystem;

const std::string kParity = PARITY_EXECUTABLE;
// Loading a case takes well under a second; a minute is the loaded-machine margin, far below
// what the hostile cases took before they were refused (minutes, or a std::bad_alloc).
constexpr int kLimitSeconds = 60;

// A Fashion-MNIST case whose [model] is `input` and `layers` (the TOML inside the brackets).
std::string layers_case(const std::string& input, const std::string& layers,
                        const std::string& extra = "") {
  return fmt::format(
      "[model]\ninput = {}\nloss = \"softmax_cross_entropy\"\nlayers = [\n{}\n]\n"
      "[train]\nsteps = 2\n[init]\nscheme = \"flax\"\n{}",
      input, layers, extra);
}

class CaseLimitsFaults : public ::testing::Test {
 protected:
  // `parity ARGUMENTS` with the case `text` written to CASE.toml (ARGUMENTS' "{case}").
  testing::CommandResult parity(const std::string& arguments, const std::string& text) {
    const fs::path file = dir_.path("hostile.toml");
    testing::write_bytes(file, text);
    return run_command(
        fmt::format(
            "{} {}", kParity,
            fmt::format(fmt::runtime(arguments), fmt::arg("case", shell_quote(file.string())),
                        fmt::arg("out", shell_quote(dir_.path("out").string())))),
        kLimitSeconds);
  }

  testing::TempDir dir_;
};

TEST_F(CaseLimitsFaults, ADenseLayerOf4e8FeaturesIsRefusedByTheMemoryEstimate) {
  const auto result =
      parity("program {case}", layers_case("[784]",
                                           "{ kind = \"dense\", features = 400000000 },\n"
                                           "{ kind = \"dense\", features = 10 }"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("needs at least"));
  EXPECT_THAT(result.output, HasSubstr("TiB of memory"));
  EXPECT_THAT(result.output, HasSubstr("the largest layer, model.layers[0] (dense at"));
  EXPECT_THAT(result.output, HasSubstr("use fewer features"));
}

TEST_F(CaseLimitsFaults, FeaturesBeyondInt32AreRefusedAsAKeysBound) {
  const auto result =
      parity("pmap {case} --out {out}",
             layers_case("[784]", "{ kind = \"dense\", features = 9223372036854775807 }"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("model.layers[0].features: expected an integer in [1, 2147483647]"));
}

TEST_F(CaseLimitsFaults, AConvPaddedBy100000IsRefusedBeforeDdpRefAsksForTerabytes) {
  const auto result = parity(
      "ddp {case} --out {out}",
      layers_case("[28, 28, 1]",
                  "{ kind = \"conv\", features = 16, kernel = [3, 3], padding = [[100000, 100000], "
                  "[100000, 100000]] },\n{ kind = \"global_avg_pool\" },\n"
                  "{ kind = \"dense\", features = 10 }"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("the largest layer, model.layers[0] (conv at"));
  EXPECT_THAT(result.output, HasSubstr("less padding"));
}

TEST_F(CaseLimitsFaults, TwoHundredThousandLayersAreRefusedBeforeTheirShapesAreInferred) {
  std::string layers;
  for (int i = 0; i < 200000; ++i) layers += "{ kind = \"relu\" },\n";
  const auto result = parity("program {case}",
                             layers_case("[784]", layers + "{ kind = \"dense\", features = 10 }"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("model.layers: 200001 layers (those inside residuals "
                                       "counted), more than the 1024"));
  EXPECT_THAT(result.output, HasSubstr("use at most 1024 layers"));
}

TEST_F(CaseLimitsFaults, ShardedProgramsOfADropoutCaseAreRefusedUpFront) {
  const auto result =
      run_command(fmt::format("{} program mlp-fmnist-dropout --sharded", kParity), kLimitSeconds);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("--sharded shows case mlp-fmnist-dropout under "
                                       "parallel.style = \"jit-dp\", which it cannot train"));
  EXPECT_THAT(result.output, HasSubstr("one dropout mask for the global batch"));
  EXPECT_THAT(result.output, HasSubstr("without --sharded"));
  EXPECT_THAT(result.output, Not(HasSubstr("internal")));
}

TEST_F(CaseLimitsFaults, ACasePathThatLoopsIsNamedWithTheReason) {
  const fs::path a = dir_.path("a.toml");
  const fs::path b = dir_.path("b.toml");
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  const auto result =
      run_command(fmt::format("{} program {}", kParity, shell_quote(a.string())), kLimitSeconds);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("case file " + a.string() + " cannot be read"));
  EXPECT_THAT(result.output, HasSubstr("symbolic links"));
}

TEST_F(CaseLimitsFaults, BatchNormOnTokensIsRefusedBeforeDdpRefBuildsIt) {
  const auto result =
      parity("ddp {case} --out {out}",
             layers_case("[28, 28, 1]",
                         "{ kind = \"patch_embed\", patch = [7, 7], features = 8 },\n"
                         "{ kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5 },\n"
                         "{ kind = \"mean_tokens\" },\n{ kind = \"dense\", features = 10 }"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("model.layers[1]: batch_norm at"));
  EXPECT_THAT(result.output, HasSubstr("use layer_norm on tokens"));
}

TEST_F(CaseLimitsFaults, PmapWithDropoutInTwoProcessesIsRefusedBeforeTheWorkersStart) {
  const auto result = run_command(
      fmt::format("{} pmap mlp-fmnist-dropout --nproc 2 --set parallel.processes=2 --out {}",
                  kParity, shell_quote(dir_.path("out").string())),
      kLimitSeconds);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("parallel.processes: with dropout the engine records the "
                                       "masks of one process's devices only"));
  EXPECT_THAT(result.output, HasSubstr("set parallel.processes = 1"));
  EXPECT_FALSE(fs::exists(dir_.path("out"))) << "no worker should have started";
}

TEST_F(CaseLimitsFaults, ASecondClassTokenIsRefused) {
  const auto result =
      parity("program {case}",
             layers_case("[28, 28, 1]",
                         "{ kind = \"patch_embed\", patch = [7, 7], features = 8 },\n"
                         "{ kind = \"class_token\" },\n{ kind = \"class_token\" },\n"
                         "{ kind = \"take_class_token\" },\n{ kind = \"dense\", features = 10 }"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("model.layers[2]: class_token at"));
  EXPECT_THAT(result.output, HasSubstr("the first is model.layers[1]"));
  EXPECT_THAT(result.output, HasSubstr("keep one class_token"));
}

}  // namespace
}  // namespace parity
