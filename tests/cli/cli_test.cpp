// The `parity` executable as a user meets it: help, version, exit codes, and the small
// subcommands (cases, init, rng, program) whose output is checked.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "parity/common/init_params.h"
#include "parity/common/tensor_file.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

const std::string kParity = PARITY_EXECUTABLE;

TEST(Cli, VersionAndHelp) {
  auto version = testing::run_command(kParity + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, HasSubstr("parity 0."));
  auto help = testing::run_command(kParity + " --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"init", "ddp", "cases", "rng"}) {
    EXPECT_THAT(help.output, HasSubstr(command));
  }
}

TEST(Cli, UnknownSubcommandIsAnInputError) {
  auto result = testing::run_command(kParity + " trian");
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

TEST(Cli, CasesListShowsTheDocumentsCases) {
  auto result = testing::run_command(kParity + " cases list");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* name : {"mlp2-fmnist", "linear1024-mse", "mlp4-1024"}) {
    EXPECT_THAT(result.output, HasSubstr(name));
  }
}

// A program that runs under shard_map prints its shard_map step: values typed with the axes
// they vary along, the params pvary'd and the gradients summed by psum_invariant; P3's program
// under pmap prints the jitted step, untyped.
TEST(Cli, ProgramPrintsTheShardMapStepOfAShardMapProgram) {
  auto shard_mapped = testing::run_command(kParity + " program p3b-psum-loss-shard-map", 60);
  ASSERT_EQ(shard_mapped.exit_code, 0) << shard_mapped.output;
  EXPECT_THAT(shard_mapped.output, HasSubstr("f32[784,256]{V:data} = pvary[axes=('data',)]"));
  EXPECT_THAT(shard_mapped.output, HasSubstr("f32[784,256] = psum_invariant[axes=('data',)"));
  auto pmapped = testing::run_command(kParity + " program p3-psum-loss-inside-grad", 60);
  ASSERT_EQ(pmapped.exit_code, 0) << pmapped.output;
  EXPECT_THAT(pmapped.output, ::testing::Not(HasSubstr("pvary")));
}

TEST(Cli, InitWritesTheCasesParametersFromThreefry) {
  auto dir = testing::fresh_directory("cli-init");
  auto path = dir / "init.safetensors";
  auto result =
      testing::run_command(fmt::format("{} init mlp2-fmnist --out {}", kParity, path.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  SafetensorsFile file = read_safetensors(path);
  ASSERT_EQ(file.tensors.size(), 4u);
  EXPECT_EQ(file.tensors.at("dense0.kernel").shape, (Shape{784, 256}));
  EXPECT_EQ(file.tensors.at("dense1.bias").shape, (Shape{10}));
  EXPECT_EQ(file.metadata.at("case"), "mlp2-fmnist");
  // The file holds exactly what the library computes for the case's seed and scale.
  NamedTensors expected = init_mlp_params({784, 256, 10}, 0, 0.01);
  for (const auto& [name, tensor] : expected) {
    EXPECT_TRUE(file.tensors.at(name).bytes == tensor.bytes) << name;
  }
}

TEST(Cli, RngKeyPrintsJaxsKeyData) {
  // jax.random.PRNGKey(42) -> [0, 42] (key_data of a threefry2x32 key: high word, low word).
  auto result = testing::run_command(kParity + " rng key 42");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(nlohmann::json::parse(result.output), nlohmann::json::parse("[0, 42]"));
}

TEST(Cli, BadCaseOverrideNamesTheKeyAndExitsWithTwo) {
  auto result = testing::run_command(kParity + " init mlp2-fmnist --set train.lrr=1 --out /tmp/x");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("lrr"));
  EXPECT_THAT(result.output, HasSubstr("did you mean 'lr'"));
}

}  // namespace
}  // namespace parity
