// run_child_processes with real children (/bin/sh scripts): how failures are reported, the
// grace period after the first failure, and a stopped child, which is killed after the grace
// period even when no other child ever fails.
#include "parity/common/child_processes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "test_files.h"

namespace parity {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Each child runs `sh -c "$PARITY_TEST_SCRIPT"`; the script is the child's own. A script that
// waits runs `exec sleep`, so that killing the child kills the sleep too (an orphaned sleep
// would hold the test's output open, and ctest waits for it).
ChildProcess child(const std::string& label, const std::string& script) {
  return {label, {{"PARITY_TEST_SCRIPT", script}}};
}

std::vector<std::string> run(const std::vector<ChildProcess>& children, int grace_seconds,
                             const std::filesystem::path& run_dir) {
  return run_child_processes("/bin/sh", {"-c", "eval \"$PARITY_TEST_SCRIPT\""}, children,
                             std::chrono::seconds(grace_seconds), run_dir);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(ChildProcesses, ChildrenThatExitZeroAreNoFailure) {
  testing::TempDir temp;
  EXPECT_TRUE(run({child("a", "exit 0"), child("b", "true")}, 5, temp.path("run")).empty());
}

TEST(ChildProcesses, AFailureNamesTheChildAndItsExit) {
  testing::TempDir temp;
  EXPECT_THAT(
      run({child("process 0", "exit 0"), child("process 1", "exit 3")}, 5, temp.path("run")),
      ElementsAre("process 1 exited with code 3"));
}

// The survivor of a failure gets the grace period, then SIGKILL.
TEST(ChildProcesses, AChildStillRunningAfterTheGraceIsKilled) {
  testing::TempDir temp;
  const auto start = Clock::now();
  const auto failures = run({child("process 0", "exec sleep 300"), child("process 1", "exit 1")}, 1,
                            temp.path("run"));
  EXPECT_LT(seconds_since(start), 60);
  EXPECT_THAT(failures, ElementsAre("process 1 exited with code 1",
                                    "process 0 was killed: still running 1 s after the first "
                                    "failure"));
}

// A peer that waits on the stopped child for ever (sleep: a collective with no timeout) would
// keep the launcher waiting for ever if only failures started the grace period.
TEST(ChildProcesses, AStoppedChildIsKilledAfterTheGraceEvenWhenNoOtherFails) {
  testing::TempDir temp;
  const auto start = Clock::now();
  const auto failures =
      run({child("process 0", "exec sleep 300"), child("process 1", "kill -STOP $$")}, 1,
          temp.path("run"));
  EXPECT_LT(seconds_since(start), 60);
  EXPECT_GE(seconds_since(start), 2);  // one grace for the stopped child, one for the survivor
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0], "process 1 was killed: stopped (SIGSTOP or a debugger) for 1 s");
  EXPECT_THAT(failures[1], HasSubstr("process 0 was killed: still running"));
}

// A child stopped and continued within the grace period is not a failure.
TEST(ChildProcesses, AChildStoppedBrieflyIsNoFailure) {
  testing::TempDir temp;
  // The child stops itself; a helper in its shell's background continues it after 0.2 s.
  const auto failures =
      run({child("process 0", "(sleep 0.2; kill -CONT $$) & kill -STOP $$; wait; exit 0")}, 3,
          temp.path("run"));
  EXPECT_TRUE(failures.empty()) << failures.front();
}

}  // namespace
}  // namespace parity
