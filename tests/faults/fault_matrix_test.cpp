// The fault matrix: every way a run can be cut short, done to real runs, each asserting the exit
// code, how long the run took to end, and what run.json and the reports say afterwards. The
// fault table of docs/faults.md lists the same faults with times measured by this suite.
//
// Each multi-process run trains mlp2-fmnist on 2 replicas in 2 processes with --timeout 5, and
// far more steps than it will reach, so the fault always lands mid-training.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "background_process.h"
#include "command.h"
#include "parity/common/run_dir.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using testing::BackgroundProcess;

namespace fs = std::filesystem;

const std::string kParity = PARITY_EXECUTABLE;
constexpr int kTimeout = 5;  // --timeout of every run here
// run_child_processes' grace after the first failure: the collective timeout plus 10 s.
constexpr int kGrace = kTimeout + 10;
// Start-up, the loss of a step or two, and a loaded test machine.
constexpr int kMargin = 15;

std::vector<std::string> two_process_run(const std::string& producer, const fs::path& out,
                                         const std::string& steps = "1000000") {
  std::vector<std::string> arguments = {producer,
                                        "mlp2-fmnist",
                                        "--nproc",
                                        "2",
                                        "--timeout",
                                        std::to_string(kTimeout),
                                        "--set",
                                        "parallel.replicas=2",
                                        "--set",
                                        "train.steps=" + steps,
                                        "--out",
                                        out.string(),
                                        "--quiet"};
  if (producer == "pmap") arguments.insert(arguments.end(), {"--set", "parallel.processes=2"});
  return arguments;
}

// The launcher's worker that hosts rank (ddp) or process (pmap) `index`.
pid_t worker(pid_t launcher, const std::string& producer, int index) {
  const std::string variable = producer == "ddp" ? "RANK" : "PARITY_PMAP_PROCESS_ID";
  for (pid_t child : testing::children_of(launcher)) {
    if (testing::environment_of(child, variable) == std::to_string(index)) return child;
  }
  return -1;
}

// Waits until the run in `out` has recorded a few steps: every process has joined.
void wait_until_training(const fs::path& out) {
  ASSERT_TRUE(testing::eventually([&] { return testing::count_lines(out / "metrics.jsonl") >= 3; },
                                  std::chrono::seconds(60)))
      << "the run never started training";
}

RunInfo run_info(const fs::path& dir) {
  // Only run.json is of interest; a running run's half-written last step is left out.
  return read_run_dir(dir).info;
}

struct FaultOutcome {
  int exit_code = -1;     // 128 + signal when it ended by a signal
  double seconds = 0;     // from the fault to the launcher's end
  std::string output;
  std::vector<pid_t> workers;
};

// "pid 12 S: futex_wait_queue futex_wait_queue do_epoll_wait": each process's state and the
// kernel function each of its threads sleeps in, for a run that did not end.
std::string describe_states(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) {
    const fs::path proc = "/proc/" + std::to_string(pid);
    const std::string stat = testing::read_whole_file(proc / "stat");
    const size_t close = stat.rfind(')');
    text += fmt::format("pid {} {}:", pid,
                        close == std::string::npos ? "gone" : stat.substr(close + 2, 1));
    std::error_code error;
    for (const auto& task : fs::directory_iterator(proc / "task", error)) {
      text += " " + testing::read_whole_file(task.path() / "wchan");
    }
    text += "; ";
  }
  return text;
}

// Starts a two-process run, lets it train, does `fault` to the process `target` returns, and
// waits for the launcher to end.
template <typename Target>
FaultOutcome run_with_fault(const std::string& producer, const fs::path& out, int signal,
                            Target target, int limit_seconds) {
  BackgroundProcess launcher(kParity, two_process_run(producer, out), out.string() + ".log");
  wait_until_training(out);
  FaultOutcome outcome;
  outcome.workers = testing::children_of(launcher.pid());
  const pid_t victim = target(launcher.pid());
  EXPECT_GT(victim, 0);
  const auto fault_time = testing::Clock::now();
  kill(victim, signal);
  const auto status = launcher.wait_for(std::chrono::seconds(limit_seconds + 60));
  if (!status) {
    ADD_FAILURE() << "the launcher never ended; its workers: " << describe_states(outcome.workers)
                  << "\nits output:\n" << launcher.output();
    return outcome;
  }
  outcome.exit_code =
      WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
  outcome.seconds = launcher.seconds_to_end(fault_time);
  outcome.output = launcher.output();
  EXPECT_LE(outcome.seconds, limit_seconds) << outcome.output;
  // No worker outlives its launcher (run_child_processes kills or reaps them all).
  for (pid_t pid : outcome.workers) {
    EXPECT_TRUE(testing::eventually([&] { return !testing::is_alive(pid); },
                                    std::chrono::seconds(10)))
        << "worker " << pid << " outlived its launcher";
  }
  std::cout << fmt::format("[ fault    ] {} {} to pid {}: exit {} after {:.1f} s\n", producer,
                           strsignal(signal), victim, outcome.exit_code, outcome.seconds);
  return outcome;
}

// One row of the matrix: what is done to which process of a running two-process run, and
// what must follow.
struct Fault {
  std::string name;      // the test's name
  std::string producer;  // ddp | pmap
  int signal;
  int target;            // the worker hosting rank/process `target`, or kLauncher
  int limit_seconds;     // from the fault to the launcher's end
  int exit_code;         // the launcher's (128 + signal when the signal ended it)
  std::vector<std::string> failure;  // in run.json's failure
  std::vector<std::string> output;   // in the launcher's output (its workers' messages)
};
constexpr int kLauncher = -1;

std::ostream& operator<<(std::ostream& out, const Fault& fault) { return out << fault.name; }

class FaultMatrix : public ::testing::TestWithParam<Fault> {};

TEST_P(FaultMatrix, EndsInTimeWithTheRightExitAndRecordsWhy) {
  const Fault& fault = GetParam();
  testing::TempDir temp;
  const fs::path out = temp.path("run");
  const FaultOutcome outcome = run_with_fault(
      fault.producer, out, fault.signal,
      [&](pid_t launcher) {
        return fault.target == kLauncher ? launcher : worker(launcher, fault.producer, fault.target);
      },
      fault.limit_seconds);
  EXPECT_EQ(outcome.exit_code, fault.exit_code) << outcome.output;
  for (const std::string& text : fault.output) EXPECT_THAT(outcome.output, HasSubstr(text));
  EXPECT_THAT(outcome.output, ::testing::Not(HasSubstr("internal error")));
  // Workers of a launcher that died record why as they go: give them a moment.
  EXPECT_TRUE(testing::eventually([&] { return run_info(out).status != "running"; },
                                  std::chrono::seconds(10)));
  const RunInfo info = run_info(out);
  EXPECT_EQ(info.status, "incomplete");
  for (const std::string& text : fault.failure) EXPECT_THAT(info.failure, HasSubstr(text));
}

INSTANTIATE_TEST_SUITE_P(
    Faults, FaultMatrix,
    ::testing::Values(
        Fault{"DdpWorkerKilled", "ddp", SIGKILL, 1, kTimeout + kMargin, 1,
              {"lost: rank 1 (pid", ", exited)"},
              {"process 1 (ranks 1..1) was killed by signal 9"}},
        // Process 0 wrote run.json and died, and the store with it: the launcher records why,
        // and the survivor names rank 0, not every rank as "never joined".
        Fault{"DdpProcessZeroKilled", "ddp", SIGKILL, 0, kTimeout + kMargin, 1,
              {"process 0 (ranks 0..0) was killed by signal 9"},
              {"lost: rank 0 (pid"}},
        // The survivor's collective times out, then the launcher kills the stopped process
        // after its grace period.
        Fault{"DdpProcessZeroStopped", "ddp", SIGSTOP, 0, kTimeout + kGrace + kMargin, 1,
              {"process 0 (ranks 0..0) was killed: stopped"},
              {"lost: rank 0 (pid", ", stopped)"}},
        // The survivor's collective times out; the launcher kills the stopped worker once it
        // has been stopped for its grace period, even should the survivor hang instead.
        Fault{"DdpWorkerStopped", "ddp", SIGSTOP, 1, kGrace + kMargin, 1,
              {"lost: rank 1 (pid", ", stopped)"},
              {}},
        Fault{"DdpWorkerTerminated", "ddp", SIGTERM, 1, kTimeout + kMargin, 1,
              {"lost: rank 1 (pid"},
              {"process 1 (ranks 1..1) was killed by signal 15"}},
        // The workers get SIGTERM from the kernel (PR_SET_PDEATHSIG) and process 0 says why.
        Fault{"DdpLauncherTerminated", "ddp", SIGTERM, kLauncher, kMargin, 128 + SIGTERM,
              {"stopped because its launcher (pid"},
              {}},
        Fault{"DdpLauncherKilled", "ddp", SIGKILL, kLauncher, kMargin, 128 + SIGKILL,
              {"stopped because its launcher (pid"},
              {}},
        // Was exit 4, "internal error: gloo Read error".
        Fault{"PmapWorkerKilled", "pmap", SIGKILL, 1, kTimeout + kMargin, 1,
              {"lost engine process 1 (pid"},
              {}},
        Fault{"PmapProcessZeroKilled", "pmap", SIGKILL, 0, kTimeout + kMargin, 1,
              {"engine process 0 was killed by signal 9"},
              {"lost engine process 0 (pid"}},
        Fault{"PmapLauncherKilled", "pmap", SIGKILL, kLauncher, kMargin, 128 + SIGKILL,
              {"stopped because its launcher (pid"},
              {}}),
    [](const ::testing::TestParamInfo<Fault>& row) { return row.param.name; });

TEST(Stops, ALauncherStoppedAndContinuedStillFinishesTheRun) {
  testing::TempDir temp;
  const fs::path out = temp.path("run");
  BackgroundProcess launcher(kParity, two_process_run("ddp", out, "300"),
                             out.string() + ".log");
  wait_until_training(out);
  kill(launcher.pid(), SIGSTOP);
  // The workers do not need their launcher to train; they finish while it is stopped.
  EXPECT_TRUE(testing::eventually([&] { return run_info(out).status == "complete"; },
                                  std::chrono::seconds(120)));
  kill(launcher.pid(), SIGCONT);
  const auto status = launcher.wait_for(std::chrono::seconds(kMargin));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launcher.output();
  EXPECT_EQ(read_run_dir(out).steps.size(), 300u);
}

TEST(Stops, AnInterruptedRunLeavesNoOldVerdictBehind) {
  testing::TempDir temp;
  const fs::path job = temp.path("out") / "mlp2-fmnist";
  // A previous run's verdict, as a CI would find it.
  fs::create_directories(job / "report");
  for (const char* name : {"report.json", "junit.xml", "report.html", "report.md"}) {
    std::ofstream(job / "report" / name) << "{\"verdict\": \"equivalent\"}\n";
  }
  BackgroundProcess run(kParity,
                        {"run", "mlp2-fmnist", "--out", temp.path("out").string(), "--set",
                         "train.steps=1000000", "--set", "parallel.replicas=2"},
                        temp.path("run.log"));
  wait_until_training(job / "ddp");
  const auto fault_time = testing::Clock::now();
  kill(run.pid(), SIGINT);
  const auto status = run.wait_for(std::chrono::seconds(kMargin));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGINT) << run.output();
  std::cout << fmt::format("[ fault    ] run SIGINT: ended after {:.1f} s\n",
                           run.seconds_to_end(fault_time));
  for (const char* name : {"report.json", "junit.xml", "report.html", "report.md"}) {
    EXPECT_FALSE(fs::exists(job / "report" / name)) << name << " of the previous run is still there";
  }
  const RunInfo info = run_info(job / "ddp");
  EXPECT_EQ(info.status, "incomplete");
  EXPECT_EQ(info.failure, "interrupted by SIGINT (Ctrl-C)");
}

TEST(Stops, ASecondRunInTheSameFolderIsRefusedNamingTheFirst) {
  testing::TempDir temp;
  const fs::path out = temp.path("out");
  BackgroundProcess first(kParity,
                          {"run", "mlp2-fmnist", "--out", out.string(), "--set",
                           "train.steps=1000000", "--set", "parallel.replicas=2"},
                          temp.path("first.log"));
  wait_until_training(out / "mlp2-fmnist" / "ddp");
  const auto second = testing::run_command(
      fmt::format("{} run mlp2-fmnist --out {} --set train.steps=5", kParity, out.string()), 60);
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_THAT(second.output, HasSubstr(fmt::format("is in use by another parity process (pid {}, "
                                                   "`parity run mlp2-fmnist`",
                                                   first.pid())));
  // The same for a producer writing a run directory another one is writing.
  const auto producer = testing::run_command(
      fmt::format("{} ddp mlp2-fmnist --out {} --overwrite --set train.steps=5 --quiet", kParity,
                  (out / "mlp2-fmnist" / "ddp").string()),
      60);
  EXPECT_EQ(producer.exit_code, 2) << producer.output;
  EXPECT_THAT(producer.output, HasSubstr("is in use by another parity process"));
}

class FinishedRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto trained = testing::run_command(
        fmt::format("{} ddp mlp2-fmnist --set train.steps=20 --set parallel.replicas=2 --out {} "
                    "--quiet",
                    kParity, run_a().string()),
        120);
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    fs::copy(run_a(), run_b(), fs::copy_options::recursive);
  }
  fs::path run_a() const { return temp_.path("a"); }
  fs::path run_b() const { return temp_.path("b"); }
  testing::TempDir temp_;
};

TEST_F(FinishedRuns, ACompleteRunCutShortIsJudgedIncompleteByCompareAndGate) {
  // Keep 15 of the 20 lines: what a copy cut short, or an edited file, leaves.
  const std::string text = testing::read_whole_file(run_b() / "metrics.jsonl");
  size_t end = 0;
  for (int line = 0; line < 15; ++line) end = text.find('\n', end) + 1;
  std::ofstream(run_b() / "metrics.jsonl", std::ios::trunc) << text.substr(0, end);

  const auto compared = testing::run_command(
      fmt::format("{} compare {} {}", kParity, run_b().string(), run_a().string()), 60);
  EXPECT_EQ(compared.exit_code, 3) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("metrics.jsonl holds 15 of the 20 steps it promises"));
  const auto gated = testing::run_command(
      fmt::format("{} gate --baseline {} --candidate {}", kParity, run_a().string(),
                  run_b().string()),
      60);
  EXPECT_EQ(gated.exit_code, 3) << gated.output;
}

TEST_F(FinishedRuns, AnOracleNoMorePreciseThanTheRunsIsRefused) {
  const auto compared = testing::run_command(fmt::format(
      "{} compare {} {} --oracle {}", kParity, run_a().string(), run_b().string(), run_a().string()));
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr("the oracle trained in f32, no more precise than the runs "
                                         "it would judge (f32 and f32)"));
}

TEST_F(FinishedRuns, AReportThatCannotBeWrittenLeavesNoOldVerdict) {
  const fs::path report = temp_.path("report");
  const auto first = testing::run_command(fmt::format(
      "{} compare {} {} --report {}", kParity, run_a().string(), run_b().string(), report.string()));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_TRUE(fs::exists(report / "junit.xml"));
  // A full disk, as a file size limit gives it: writes past 4 KiB fail with EFBIG (SIGXFSZ
  // ignored), so report.html, the largest, cannot be written.
  const auto full = testing::run_command(
      fmt::format("trap '' XFSZ; ulimit -f 4; exec {} compare {} {} --overwrite --report {}",
                  kParity,
                  run_a().string(), run_b().string(), report.string()),
      60);
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_THAT(full.output, HasSubstr("cannot write the report file"));
  for (const char* name : {"report.json", "junit.xml", "report.html", "report.md"}) {
    EXPECT_FALSE(fs::exists(report / name)) << name << " of the previous comparison is still there";
  }
}

}  // namespace
}  // namespace parity
