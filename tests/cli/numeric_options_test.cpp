// Every numeric option of every subcommand refuses NaN, infinities and values out of its range
// with exit code 2 and a message naming the option and the range (cli/numeric_options.h), and
// case sizes and output paths that cannot work are bad input too, refused before any work.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "command.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::run_command;
using testing::shell_quote;

const std::string kParity = PARITY_EXECUTABLE;

struct RefusedOption {
  std::string arguments;  // after `parity`
  std::string expected;   // what the message must say
};

void PrintTo(const RefusedOption& option, std::ostream* out) { *out << option.arguments; }

class NumericOption : public ::testing::TestWithParam<RefusedOption> {};

// Validation runs while the command line is parsed, before any run directory or case is read,
// so the paths given need not exist.
TEST_P(NumericOption, IsRefusedWithItsNameAndRange) {
  const auto result = run_command(kParity + " " + GetParam().arguments);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr(GetParam().expected));
}

// The ranges are those registered in cli/*_command.cpp: tolerances and growths >= 0,
// timeouts in (0, a week = 604800 s], --nproc within the 1024 replicas a case may have,
// --allowed-bad-steps and --step within the 10,000,000 steps a case may run.
INSTANTIATE_TEST_SUITE_P(
    EverySubcommand, NumericOption,
    ::testing::Values(
        RefusedOption{"compare a b --loss-rtol nan",
                      "--loss-rtol: nan is not accepted; expected a finite number >= 0"},
        RefusedOption{"compare a b --loss-atol -1e-9",
                      "--loss-atol: -1e-9 is not accepted; expected a finite number >= 0"},
        RefusedOption{"run --tensor-rtol inf",
                      "--tensor-rtol: inf is not accepted; expected a finite number >= 0"},
        RefusedOption{"cases run P2 --tensor-atol -inf",
                      "--tensor-atol: -inf is not accepted; expected a finite number >= 0"},
        RefusedOption{"compare a b --allowed-bad-steps -1",
                      "--allowed-bad-steps: -1 is not accepted; expected a whole number in [0, "
                      "10000000]"},
        RefusedOption{"ddp mlp2-fmnist --timeout nan",
                      "--timeout: nan is not accepted; expected a finite number in (0, 604800]"},
        RefusedOption{"ddp mlp2-fmnist --timeout 0",
                      "--timeout: 0 is not accepted; expected a finite number in (0, 604800]"},
        RefusedOption{"ddp mlp2-fmnist --nproc 2000",
                      "--nproc: 2000 is not accepted; expected a whole number in [1, 1024]"},
        RefusedOption{"pmap mlp2-fmnist --timeout 1e300",
                      "--timeout: 1e300 is not accepted; expected a finite number in (0, 604800]"},
        RefusedOption{"pmap mlp2-fmnist --nproc 0",
                      "--nproc: 0 is not accepted; expected a whole number in [1, 1024]"},
        RefusedOption{"gate --baseline b --calibrate 1 --margin nan",
                      "--margin: nan is not accepted; expected a finite number in [1, 1000]"},
        RefusedOption{"gate --baseline b --candidate c --max-throughput-drop nan",
                      "--max-throughput-drop: nan is not accepted; expected a finite number in "
                      "[0, 100]"},
        RefusedOption{"gate --baseline b --candidate c --max-memory-growth nan",
                      "--max-memory-growth: nan is not accepted; expected a finite number >= 0"},
        RefusedOption{"gate --baseline b --calibrate 0",
                      "--calibrate: 0 is not accepted; expected a whole number in [1, 100]"},
        RefusedOption{"gate --baseline b --candidate c --speed-reruns 0",
                      "--speed-reruns: 0 is not accepted; expected a whole number in [1, 100]"},
        RefusedOption{"gate --baseline b --candidate c --speed-confidence 100",
                      "--speed-confidence: 100 is not accepted; expected a finite number in "
                      "[50, 99.9]"},
        RefusedOption{"tensors diff a b --rtol nan",
                      "--rtol: nan is not accepted; expected a finite number >= 0"},
        RefusedOption{"tensors diff a b --atol inf",
                      "--atol: inf is not accepted; expected a finite number >= 0"},
        RefusedOption{"import tensors s --case mlp2-fmnist --out o --step -1",
                      "--step: -1 is not accepted; expected a whole number in [0, 9999999]"},
        RefusedOption{"rng split 0,42 --num -1",
                      "--num: -1 is not accepted; expected a whole number in [0, 16777216]"},
        RefusedOption{"rng uniform 0,42 --minval nan",
                      "--minval: nan is not accepted; expected a finite number"},
        RefusedOption{"rng uniform 0,42 --maxval inf",
                      "--maxval: inf is not accepted; expected a finite number"}));

TEST(NumericOptions, ValuesInRangeAreTaken) {
  // jax.random.split(PRNGKey(42), 3) has 3 keys; --minval/--maxval finite are taken.
  auto result = run_command(kParity + " rng split 0,42 --num 3");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  result = run_command(kParity + " rng uniform 0,42 --minval -2.5 --maxval 2.5 --shape 2");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  // The ranges' ends are inside: the most bad steps, a tolerance of 0 (the run directories do
  // not exist, so the command fails after parsing, on reading them).
  result = run_command(kParity + " compare a b --allowed-bad-steps 10000000 --loss-rtol 0");
  EXPECT_THAT(result.output, ::testing::Not(HasSubstr("is not accepted"))) << result.output;
}

TEST(CaseLimitsCli, AbsurdCaseSizesAreBadInputBeforeAnyWork) {
  // `parity program` traces and runs the step: these would end in an internal check,
  // std::bad_alloc or a minute of tracing; the case's loading refuses them first.
  auto result = run_command(kParity + " program mlp2-fmnist --set parallel.replicas=100000", 60);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("parallel.replicas: expected an integer <= 1024"));
  result = run_command(
      kParity + " program mlp2-fmnist --set 'model.widths=[784, 400000000, 10]'", 60);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("of memory, more than this machine's"));
  result = run_command(kParity + " ddp mlp2-fmnist --set train.steps=9223372036854775807", 60);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("train.steps: expected an integer <= 10000000"));
}

TEST(OutputPaths, ADirectoryNamedLikeACaseFileAndAFileAsOutAreBadInput) {
  testing::TempDir dir;
  fs::create_directories(dir.path("x.toml"));
  auto result = run_command(kParity + " program " + shell_quote(dir.path("x.toml").string()));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr(dir.path("x.toml").string() + " is a directory"));

  // --out naming a file: refused before any case runs, naming the path.
  const fs::path file = dir.path("a-file");
  testing::write_bytes(file, "not a directory\n");
  result = run_command(fmt::format("{} cases run P2 --out {}", kParity, shell_quote(file.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("cannot create the output directory " + file.string() + ": "));
  result = run_command(fmt::format("{} run --set train.steps=1 --out {}", kParity,
                                   shell_quote((file / "under").string())));
  // parity run: whichever creates the case's folder first refuses, naming the path.
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr((file / "under").string()));
  EXPECT_EQ(testing::read_bytes(file), "not a directory\n");
}

}  // namespace
}  // namespace parity
