// Failures: a rank that throws, dies or produces NaN makes the run fail within the timeout,
// names the rank, keeps what was written, and marks the run directory incomplete.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "command.h"
#include "parity/common/loopback_port.h"
#include "parity/common/run_dir.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kParity = PARITY_EXECUTABLE;
const std::string kCaseArgs =
    "mlp2-fmnist --set train.steps=8 --set parallel.replicas=4 --set data.per_replica_batch=16 "
    "--quiet";

testing::CommandResult run_ddp(const std::filesystem::path& out, const std::string& extra) {
  return testing::run_command(
      fmt::format("{} ddp {} --out {} {}", kParity, kCaseArgs, out.string(), extra), 120);
}

void expect_incomplete_after(const std::filesystem::path& dir, size_t completed_steps,
                             const std::string& failure_text) {
  RunDir run = read_run_dir(dir);
  EXPECT_EQ(run.info.status, "incomplete");
  EXPECT_THAT(run.info.failure, HasSubstr(failure_text));
  EXPECT_EQ(run.steps.size(), completed_steps);
}

TEST(DdpFaults, ThreadRankThatThrowsIsNamedAndTheRunMarkedIncomplete) {
  auto dir = testing::fresh_directory("fault-throw");
  auto result = run_ddp(dir / "run", "--inject-fault 2:3:throw --timeout 5");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 2 at step 3: injected fault"));
  EXPECT_THAT(result.output, HasSubstr("Rank(s) 0, 1, 3 could not go on without it"));
  expect_incomplete_after(dir / "run", 3, "rank 2 at step 3");
}

TEST(DdpFaults, NonFiniteLossStopsTheRunNamingTheRank) {
  auto dir = testing::fresh_directory("fault-nan");
  auto result = run_ddp(dir / "run", "--inject-fault 1:4:nan");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("step 4: the loss is not finite on rank 1 (NaN)"));
  expect_incomplete_after(dir / "run", 4, "not finite on rank 1");
}

TEST(DdpFaults, ProcessThatDiesIsNamedAndTheOthersStop) {
  auto dir = testing::fresh_directory("fault-exit");
  auto result = run_ddp(dir / "run", "--nproc 4 --inject-fault 2:3:exit --timeout 5");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 2 exits abruptly at step 3"));
  EXPECT_THAT(result.output, HasSubstr("process 2 (ranks 2..2) exited with code 3"));
  RunDir run = read_run_dir(dir / "run");
  EXPECT_NE(run.info.status, "complete");
}

TEST(DdpFaults, TorchrunRankThatNeverStartsIsNamedAfterTheTimeout) {
  auto dir = testing::fresh_directory("fault-missing");
  auto init = testing::run_command(
      fmt::format("{} init mlp2-fmnist --out {}", kParity, (dir / "init.safetensors").string()));
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const int port = free_loopback_port();
  std::string launches;
  for (int rank = 0; rank < 3; ++rank) {  // rank 3 of 4 is never started
    launches += fmt::format(
        "RANK={0} WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT={1} {2} ddp {3} --init {4} "
        "--out {5} --timeout 3 & pids=\"$pids $!\"; ",
        rank, port, kParity, kCaseArgs, (dir / "init.safetensors").string(),
        (dir / "run").string());
  }
  auto result =
      testing::run_command(launches + "s=0; for p in $pids; do wait $p || s=1; done; exit $s", 120);
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("rank 3 (never joined)"));
  expect_incomplete_after(dir / "run", 0, "rank 3 (never joined)");
}

TEST(DdpFaults, BadArgumentsAreRefusedWithTheFix) {
  auto dir = testing::fresh_directory("fault-arguments");
  auto uneven = run_ddp(dir / "a", "--nproc 3");
  EXPECT_EQ(uneven.exit_code, 2) << uneven.output;
  EXPECT_THAT(uneven.output, HasSubstr("--nproc 3: the case's 4 replicas must split evenly"));

  auto fault = run_ddp(dir / "b", "--inject-fault 2:x:boom");
  EXPECT_EQ(fault.exit_code, 2) << fault.output;
  EXPECT_THAT(fault.output, HasSubstr("expected RANK:STEP:KIND"));

  auto exit_in_threads = run_ddp(dir / "c", "--inject-fault 1:1:exit");
  EXPECT_EQ(exit_in_threads.exit_code, 2) << exit_in_threads.output;
  EXPECT_THAT(exit_in_threads.output, HasSubstr("needs process ranks"));
}

// A fault that names no rank or step of the run would do nothing, and the run pass as if the
// fault had been survived: refused before any rank starts, with threads and with processes.
TEST(DdpFaults, FaultsNamingARankOrStepTheRunLacksAreRefusedBeforeTraining) {
  auto dir = testing::fresh_directory("fault-out-of-range");
  for (const std::string processes : {"", "--nproc 2"}) {
    auto rank = run_ddp(dir / "rank", "--inject-fault 99:3:throw " + processes);
    EXPECT_EQ(rank.exit_code, 2) << rank.output;
    EXPECT_THAT(rank.output, HasSubstr("--inject-fault names rank 99, but case mlp2-fmnist has 4 "
                                       "ranks (0..3); name one of them"));
    auto step = run_ddp(dir / "step", "--inject-fault 2:999:throw " + processes);
    EXPECT_EQ(step.exit_code, 2) << step.output;
    EXPECT_THAT(step.output, HasSubstr("--inject-fault names step 999, but case mlp2-fmnist "
                                       "trains 8 steps (0..7); name one of them"));
    EXPECT_FALSE(std::filesystem::exists(dir / "step" / "metrics.jsonl")) << "it trained";
  }
}

TEST(DdpFaults, InitFileForAnotherModelIsRefusedBeforeTraining) {
  auto dir = testing::fresh_directory("fault-init");
  auto made = testing::run_command(
      fmt::format("{} init mlp2-fmnist --set model.widths=[784,128,10] --out {}", kParity,
                  (dir / "small.safetensors").string()));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto result = run_ddp(dir / "run", "--init " + (dir / "small.safetensors").string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("tensor 'dense0.kernel' is F32 (784, 128) but the case's model needs "
                        "F32 (784, 256)"));
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "run.json"));
}

// Debian 12's LibTorch 1.13 has no f16 addmm on the CPU ("addmm_impl_cpu_" not implemented
// for 'Half', raised by at::native's addmm at the first forward pass). ddp_ref asks one matmul
// up front and refuses the case before any rank starts or anything is written. A LibTorch with
// the kernel would train instead, and this test would say so.
TEST(DdpFaults, F16IsRefusedBeforeTrainingWhereLibTorchCannotMultiplyIt) {
  auto dir = testing::fresh_directory("fault-f16");
  auto result = run_ddp(dir / "run", "--set train.dtype=f16");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("train.dtype = \"f16\": this LibTorch (1.13"));
  EXPECT_THAT(result.output, HasSubstr("not implemented for 'Half'"));
  EXPECT_THAT(result.output, HasSubstr("use --set train.dtype=bf16"));
  EXPECT_THAT(result.output, Not(HasSubstr("frame #")));  // no C++ backtrace
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "run.json"));
}

// torch.optim.RMSprop and Adagrad add eps after the square root only (torch/optim/rmsprop.py,
// adagrad.py): ddp_ref refuses optax's placement by name before any rank starts.
TEST(DdpFaults, EpsInsideTheRootIsRefusedBeforeTraining) {
  auto dir = testing::fresh_directory("fault-eps-in-sqrt");
  auto result =
      run_ddp(dir / "run", "--set train.optimizer=rmsprop --set train.eps_in_sqrt=true");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("train.eps_in_sqrt = true has no torch.optim equivalent (torch's "
                        "RMSprop adds eps after the square root only)"));
  EXPECT_THAT(result.output, HasSubstr("use --set train.eps_in_sqrt=false"));
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "run.json"));
}

// DDP's Reducer averages the gradients during backward, so the loop can only clip the mean.
TEST(DdpFaults, ClippingBeforeTheMeanIsRefusedBeforeTraining) {
  auto dir = testing::fresh_directory("fault-clip-before-mean");
  auto result = run_ddp(dir / "run",
                        "--set train.clip_grad_norm=1 --set train.clip_placement=before_mean");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("train.clip_placement = \"before_mean\": under DDP the "
                                       "gradients are averaged during backward"));
  EXPECT_THAT(result.output, HasSubstr("use --set train.clip_placement=after_mean"));
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "run.json"));
}

}  // namespace
}  // namespace parity
