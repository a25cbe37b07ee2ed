// Ranks as threads of one process, as processes started by `parity ddp --nproc N`, and as
// processes started by hand with torchrun's variables must train bit for bit alike: the same
// ranks, the same Gloo ring, one intra-op thread each.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "command.h"
#include "parity/common/loopback_port.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"

namespace parity {
namespace {

const std::string kParity = PARITY_EXECUTABLE;
const std::string kCaseArgs =
    "mlp2-fmnist --set train.steps=12 --set parallel.replicas=4 --set data.per_replica_batch=32 "
    "--set train.record_steps=[11] --quiet --timeout 60";

void expect_bitwise_equal_runs(const std::filesystem::path& a, const std::filesystem::path& b) {
  RunDir run_a = read_run_dir(a);
  RunDir run_b = read_run_dir(b);
  ASSERT_EQ(run_a.info.status, "complete");
  ASSERT_EQ(run_b.info.status, "complete");
  ASSERT_EQ(run_a.steps.size(), run_b.steps.size());
  for (size_t i = 0; i < run_a.steps.size(); ++i) {
    EXPECT_EQ(run_a.steps[i].loss, run_b.steps[i].loss) << "step " << i;
    EXPECT_EQ(run_a.steps[i].replica_losses, run_b.steps[i].replica_losses) << "step " << i;
    EXPECT_EQ(run_a.steps[i].grad_norm, run_b.steps[i].grad_norm) << "step " << i;
    EXPECT_EQ(run_a.steps[i].param_norm, run_b.steps[i].param_norm) << "step " << i;
    EXPECT_EQ(run_a.steps[i].samples_digest, run_b.steps[i].samples_digest) << "step " << i;
  }
  NamedTensors tensors_a = read_step_tensors(a, 11);
  NamedTensors tensors_b = read_step_tensors(b, 11);
  ASSERT_EQ(tensors_a.size(), tensors_b.size());
  for (const auto& [name, tensor] : tensors_a) {
    ASSERT_TRUE(tensors_b.count(name)) << name;
    EXPECT_TRUE(tensor.bytes == tensors_b.at(name).bytes) << name << " differs";
  }
}

class DdpProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test: ctest runs the tests of this fixture in parallel.
    dir_ =
        testing::fresh_directory(std::string("ddp-processes-") +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto made = testing::run_command(
        fmt::format("{} init mlp2-fmnist --out {}", kParity, (dir_ / "init.safetensors").string()));
    ASSERT_EQ(made.exit_code, 0) << made.output;
    auto threads = run("threads", "");
    ASSERT_EQ(threads.exit_code, 0) << threads.output;
  }

  testing::CommandResult run(const std::string& name, const std::string& extra) {
    return testing::run_command(fmt::format("{} ddp {} --init {} --out {} {}", kParity, kCaseArgs,
                                            (dir_ / "init.safetensors").string(),
                                            (dir_ / name).string(), extra));
  }

  std::filesystem::path dir_;
};

TEST_F(DdpProcesses, TwoProcessesOfTwoRanksEqualFourThreads) {
  auto result = run("nproc2", "--nproc 2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("2 processes"), std::string::npos) << result.output;
  expect_bitwise_equal_runs(dir_ / "threads", dir_ / "nproc2");
  EXPECT_EQ(read_run_dir(dir_ / "nproc2").info.processes, 2);
}

TEST_F(DdpProcesses, FourSingleRankProcessesEqualFourThreads) {
  auto result = run("nproc4", "--nproc 4");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_bitwise_equal_runs(dir_ / "threads", dir_ / "nproc4");
}

TEST_F(DdpProcesses, ProcessesStartedWithTorchrunVariablesJoinAsTheirRanks) {
  // A port the kernel has just found free, not one derived from the pid: another test (or a
  // socket in TIME_WAIT) may hold that.
  const int port = free_loopback_port();
  std::string launches;
  for (int rank = 0; rank < 4; ++rank) {
    launches += fmt::format(
        "RANK={0} LOCAL_RANK={0} WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT={1} "
        "{2} ddp {3} --init {4} --out {5} & pids=\"$pids $!\"; ",
        rank, port, kParity, kCaseArgs, (dir_ / "init.safetensors").string(),
        (dir_ / "torchrun").string());
  }
  // Each rank's status is collected by its pid, so that a failing rank fails the test. (`wait
  // -n` in a loop was not reliable: a job that ended before the loop could be missed, and the
  // test failed with every rank successful.)
  auto result = testing::run_command(
      launches + "s=0; for p in $pids; do wait $p || { echo \"rank pid $p failed\"; s=1; }; "
                 "done; exit $s");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_bitwise_equal_runs(dir_ / "threads", dir_ / "torchrun");
}

}  // namespace
}  // namespace parity
