// Hostile case files given to the CLI: absurd sizes and depths in the layers form of a model,
// layer combinations the producers cannot train, a case path that is a loop of links. Each must
// be refused when the case is loaded (exit 2), naming the layer or key and the fix, before any
// producer starts. The run's wall-clock limit (run_command's timeout, and ctest's) catches a
// refusal that came too late; the tests assert the outcome.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

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

std::string relu_layers(int count) {
  std::string layers;
  for (int i = 0; i < count; ++i) layers += "{ kind = \"relu\" },\n";
  return layers;
}

// One hostile input: the parity command (its "{case}" the case text written to a file, "{out}"
// a fresh output folder), and what its error must say.
struct HostileCase {
  std::string name;
  std::string arguments;
  std::string text;                   // the case file; empty for a shipped case named in arguments
  std::vector<std::string> messages;  // each in the output
};

std::ostream& operator<<(std::ostream& out, const HostileCase& hostile) {
  return out << hostile.name;
}

class CaseLimitsFaults : public ::testing::TestWithParam<HostileCase> {};

TEST_P(CaseLimitsFaults, AreRefusedWithExit2NamingTheFix) {
  testing::TempDir dir;
  const fs::path file = dir.path("hostile.toml");
  testing::write_bytes(file, GetParam().text);
  const auto result =
      run_command(fmt::format("{} {}", kParity,
                              fmt::format(fmt::runtime(GetParam().arguments),
                                          fmt::arg("case", shell_quote(file.string())),
                                          fmt::arg("out", shell_quote(dir.path("out").string())))),
                  kLimitSeconds);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  for (const std::string& message : GetParam().messages) {
    EXPECT_THAT(result.output, HasSubstr(message));
  }
  EXPECT_THAT(result.output, Not(HasSubstr("internal")));
  EXPECT_FALSE(fs::exists(dir.path("out"))) << "no producer should have started";
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, CaseLimitsFaults,
    ::testing::Values(
        HostileCase{"ADenseLayerOf4e8Features",
                    "program {case}",
                    layers_case("[784]",
                                "{ kind = \"dense\", features = 400000000 },\n"
                                "{ kind = \"dense\", features = 10 }"),
                    {"needs at least", "TiB of memory",
                     "the largest layer, model.layers[0] (dense at", "use fewer features"}},
        HostileCase{"FeaturesBeyondInt32",
                    "pmap {case} --out {out}",
                    layers_case("[784]", "{ kind = \"dense\", features = 9223372036854775807 }"),
                    {"model.layers[0].features: expected an integer in [1, 2147483647]"}},
        HostileCase{"AConvPaddedBy100000",
                    "ddp {case} --out {out}",
                    layers_case("[28, 28, 1]",
                                "{ kind = \"conv\", features = 16, kernel = [3, 3], padding = "
                                "[[100000, 100000], [100000, 100000]] },\n"
                                "{ kind = \"global_avg_pool\" },\n"
                                "{ kind = \"dense\", features = 10 }"),
                    {"the largest layer, model.layers[0] (conv at", "less padding"}},
        HostileCase{
            "TwoHundredThousandLayers",
            "program {case}",
            layers_case("[784]", relu_layers(200000) + "{ kind = \"dense\", features = 10 }"),
            {"model.layers: 200001 layers (those inside residuals counted), more than "
             "the 1024",
             "use at most 1024 layers"}},
        HostileCase{"ShardedProgramsOfADropoutCase",
                    "program mlp-fmnist-dropout --sharded",
                    "",
                    {"--sharded shows case mlp-fmnist-dropout under parallel.style = "
                     "\"jit-dp\", which it cannot train",
                     "one dropout mask for the global batch", "without --sharded"}},
        HostileCase{"BatchNormOnTokens",
                    "ddp {case} --out {out}",
                    layers_case("[28, 28, 1]",
                                "{ kind = \"patch_embed\", patch = [7, 7], features = 8 },\n"
                                "{ kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5 },\n"
                                "{ kind = \"mean_tokens\" },\n{ kind = \"dense\", features = 10 }"),
                    {"model.layers[1]: batch_norm at", "use layer_norm on tokens"}},
        HostileCase{"PmapWithDropoutInTwoProcesses",
                    "pmap mlp-fmnist-dropout --nproc 2 --set parallel.processes=2 --out {out}",
                    "",
                    {"parallel.processes: with dropout the engine records the masks of one "
                     "process's devices only",
                     "set parallel.processes = 1"}},
        HostileCase{"ASecondClassToken",
                    "program {case}",
                    layers_case("[28, 28, 1]",
                                "{ kind = \"patch_embed\", patch = [7, 7], features = 8 },\n"
                                "{ kind = \"class_token\" },\n{ kind = \"class_token\" },\n"
                                "{ kind = \"take_class_token\" },\n"
                                "{ kind = \"dense\", features = 10 }"),
                    {"model.layers[2]: class_token at", "the first is model.layers[1]",
                     "keep one class_token"}}),
    [](const ::testing::TestParamInfo<HostileCase>& row) { return row.param.name; });

TEST(CaseLimitsFaultsPaths, ACasePathThatLoopsIsNamedWithTheReason) {
  testing::TempDir dir;
  const fs::path a = dir.path("a.toml");
  fs::create_symlink(dir.path("b.toml"), a);
  fs::create_symlink(a, dir.path("b.toml"));
  const auto result =
      run_command(fmt::format("{} program {}", kParity, shell_quote(a.string())), kLimitSeconds);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("case file " + a.string() + " cannot be read"));
  EXPECT_THAT(result.output, HasSubstr("symbolic links"));
}

}  // namespace
}  // namespace parity
