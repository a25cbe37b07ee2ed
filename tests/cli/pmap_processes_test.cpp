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

}  // namespace
}  // namespace parity
