// `parity pmap --nproc 2` (S9, seed 002 §3.1): two real processes of four devices, joined as
// jax.distributed.initialize joins them, train exactly the bits of one process of eight
// devices: losses, per-replica losses, sample digests, gradients and parameters. The expected
// values are the one-process run's.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "command.h"
#include "parity/common/run_dir.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

const std::string kParity = PARITY_EXECUTABLE;
const std::string kCase =
    "mlp2-fmnist --set train.steps=6 --set train.record_steps=[0,5] "
    "--set data.per_replica_batch=16 --quiet";

testing::CommandResult train(const std::filesystem::path& out, const std::string& extra) {
  return testing::run_command(
      fmt::format("{} pmap {} --out {} {}", kParity, kCase, out.string(), extra), 300);
}

TEST(PmapProcesses, TwoProcessesOfFourDevicesTrainTheBitsOfOneProcessOfEight) {
  testing::TempDir dir;
  const auto two = train(dir.path("two"), "--set parallel.processes=2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto one = train(dir.path("one"), "--init " + dir.path("two/init.safetensors").string());
  ASSERT_EQ(one.exit_code, 0) << one.output;

  const RunDir a = read_run_dir(dir.path("two"));
  const RunDir b = read_run_dir(dir.path("one"));
  EXPECT_EQ(a.info.processes, 2);
  EXPECT_EQ(b.info.processes, 1);
  ASSERT_EQ(a.steps.size(), 6u);
  ASSERT_EQ(b.steps.size(), 6u);
  for (size_t s = 0; s < 6; ++s) {
    EXPECT_EQ(a.steps[s].loss, b.steps[s].loss) << "step " << s;
    EXPECT_EQ(a.steps[s].replica_losses, b.steps[s].replica_losses) << "step " << s;
    EXPECT_EQ(a.steps[s].samples_digest, b.steps[s].samples_digest) << "step " << s;
  }
  for (int64_t step : {0, 5}) {
    const NamedTensors ta = read_step_tensors(a.dir, step);
    const NamedTensors tb = read_step_tensors(b.dir, step);
    ASSERT_EQ(ta.size(), tb.size());
    for (const auto& [name, tensor] : tb) {
      EXPECT_TRUE(ta.at(name).bytes == tensor.bytes) << name << " at step " << step;
    }
  }
  EXPECT_EQ(a.info.memory.peak_bytes_per_replica.size(), 8u);
}

TEST(PmapProcesses, AJoiningProcessWithoutItsPartnersTimesOutNamingTheCoordinator) {
  testing::TempDir dir;
  const auto alone = testing::run_command(
      fmt::format("PARITY_PMAP_COORDINATOR=127.0.0.1:1 PARITY_PMAP_PROCESS_ID=1 "
                  "PARITY_PMAP_NUM_PROCESSES=2 {} pmap {} --set parallel.processes=2 "
                  "--timeout 2 --out {}",
                  kParity, kCase, dir.path("alone").string()),
      120);
  EXPECT_EQ(alone.exit_code, 1) << alone.output;
  EXPECT_THAT(alone.output, HasSubstr("no coordinator answered at 127.0.0.1:1 within 2 s"));
}

// A process's place comes from its launcher's environment (cli/producer_processes.cpp): a
// malformed one is refused before anything starts, naming the variable (exit 2, bad input).
struct BadPlace {
  std::string name;
  std::string environment;
  std::string command;  // after `parity`
  std::string message;
};

std::ostream& operator<<(std::ostream& out, const BadPlace& place) { return out << place.name; }

class ProcessPlaces : public ::testing::TestWithParam<BadPlace> {};

TEST_P(ProcessPlaces, AreRefusedNamingTheVariable) {
  const BadPlace& place = GetParam();
  testing::TempDir dir;
  const auto result = testing::run_command(
      fmt::format("{} {} {} --out {}", place.environment, kParity, place.command,
                  dir.path("run").string()),
      60);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr(place.message));
}

const std::string kTwoEngineProcesses = "pmap " + kCase + " --set parallel.processes=2";

INSTANTIATE_TEST_SUITE_P(
    Environment, ProcessPlaces,
    ::testing::Values(
        BadPlace{"EngineCoordinatorWithoutAPort",
                 "PARITY_PMAP_COORDINATOR=localhost PARITY_PMAP_PROCESS_ID=0 "
                 "PARITY_PMAP_NUM_PROCESSES=2",
                 kTwoEngineProcesses,
                 "PARITY_PMAP_COORDINATOR='localhost' is not HOST:PORT (port 1..65535)"},
        BadPlace{"EngineProcessIdPastTheCount",
                 "PARITY_PMAP_COORDINATOR=127.0.0.1:1 PARITY_PMAP_PROCESS_ID=2 "
                 "PARITY_PMAP_NUM_PROCESSES=2",
                 kTwoEngineProcesses,
                 "PARITY_PMAP_PROCESS_ID=2 is not below PARITY_PMAP_NUM_PROCESSES=2"},
        BadPlace{"EngineSetWithoutTheProcessId", "PARITY_PMAP_COORDINATOR=127.0.0.1:1",
                 kTwoEngineProcesses, "but PARITY_PMAP_PROCESS_ID is unset"},
        BadPlace{"TorchrunWorldSizeOtherThanTheCaseReplicas",
                 "RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=1",
                 "ddp " + kCase + " --set parallel.replicas=2 --init /nonexistent.safetensors",
                 "WORLD_SIZE=3 but case mlp2-fmnist has parallel.replicas = 2"},
        BadPlace{"TorchrunRankWithoutWorldSize", "RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1",
                 "ddp " + kCase + " --init /nonexistent.safetensors",
                 "RANK is set but WORLD_SIZE is not"}),
    [](const ::testing::TestParamInfo<BadPlace>& row) { return row.param.name; });

}  // namespace
}  // namespace parity
