// What parity writes, and where, under a hostile user: files it would replace, links, empty
// output names, a report folder another parity process owns, signals early in a rerun or
// inherited as ignored, the libraries' output of worker processes, and imports that do not fit
// the run or the case. Each with the real binary, asserting its exit code, its message and what
// is on disk afterwards.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <thread>

#include "background_process.h"
#include "command.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::BackgroundProcess;

namespace fs = std::filesystem;

const std::string kParity = PARITY_EXECUTABLE;

// mlp2-fmnist on 2 replicas for a few steps: seconds to train.
constexpr const char* kSmall =
    "--set parallel.replicas=2 --set train.steps=4 --set data.per_replica_batch=16";

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

testing::CommandResult parity(const std::string& arguments, int timeout_seconds = 300) {
  return testing::run_command(kParity + " " + arguments, timeout_seconds);
}

// Two finished runs of the small case (ddp_ref and the engine), made once for the tests that
// compare them.
class OutputFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = new testing::TempDir;
    const auto made = parity(fmt::format("run mlp2-fmnist {} --out {}", kSmall,
                                         folder_->path("job").string()));
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() {
    delete folder_;
    folder_ = nullptr;
  }
  static fs::path job() { return folder_->path("job") / "mlp2-fmnist"; }
  static std::string runs() {
    return (job() / "pmap").string() + " " + (job() / "ddp").string();
  }

  testing::TempDir temp_;

 private:
  static testing::TempDir* folder_;
};
testing::TempDir* OutputFaults::folder_ = nullptr;

TEST_F(OutputFaults, InitRefusesToReplaceAFileUnlessOverwriteIsGiven) {
  const fs::path file = temp_.path("passwd");
  testing::write_bytes(file, "root:x:0:0:root:/root:/bin/bash\n");
  const auto refused = parity("init mlp2-fmnist --out " + file.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("--out " + file.string() + " already exists; pass "
                                        "--overwrite to replace it"));
  EXPECT_EQ(testing::read_bytes(file), "root:x:0:0:root:/root:/bin/bash\n");

  const auto replaced = parity("init mlp2-fmnist --overwrite --out " + file.string());
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(read_safetensors(file).metadata.at("case"), "mlp2-fmnist");
}

TEST_F(OutputFaults, ALinkedOutputIsNeitherWrittenThroughNorReplaced) {
  const fs::path target = temp_.path("precious");
  testing::write_bytes(target, "keep me");
  const fs::path link = temp_.path("init.safetensors");
  fs::create_symlink(target, link);
  const auto init = parity("init mlp2-fmnist --overwrite --out " + link.string());
  EXPECT_EQ(init.exit_code, 2) << init.output;
  EXPECT_THAT(init.output, HasSubstr("is a symbolic link (to " + target.string() + ")"));

  const fs::path report = temp_.path("report");
  fs::create_directories(report);
  fs::create_symlink(target, report / "junit.xml");
  const auto compared =
      parity(fmt::format("compare {} --overwrite --report {}", runs(), report.string()));
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output, HasSubstr((report / "junit.xml").string() +
                                         " is a symbolic link"));
  EXPECT_EQ(testing::read_bytes(target), "keep me");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_symlink(report / "junit.xml"));
}

TEST_F(OutputFaults, CompareRefusesToReplaceReportsUnlessOverwriteIsGiven) {
  const fs::path report = temp_.path("report");
  const auto first = parity(fmt::format("compare {} --report {}", runs(), report.string()));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string junit = testing::read_bytes(report / "junit.xml");
  const auto again = parity(fmt::format("compare {} --report {}", runs(), report.string()));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr("already exists; pass --overwrite"));
  EXPECT_EQ(testing::read_bytes(report / "junit.xml"), junit);
  const auto replaced =
      parity(fmt::format("compare {} --overwrite --report {}", runs(), report.string()));
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
}

TEST_F(OutputFaults, AnEmptyOutputNameIsRefusedByEveryCommand) {
  const std::string run = (job() / "ddp").string();
  const std::vector<std::string> commands = {
      "init mlp2-fmnist --out ''",
      "run mlp2-fmnist --out ''",
      "cases run P2 --out ''",
      "ddp mlp2-fmnist --out ''",
      "pmap mlp2-fmnist --out ''",
      "import metrics " + (job() / "ddp" / "metrics.jsonl").string() +
          " --case mlp2-fmnist --map loss=loss --out ''",
      "import tensors x.safetensors --case mlp2-fmnist --step 0 --out ''",
      "compare " + runs() + " --report ''",
      fmt::format("gate --baseline {} --candidate {} --report ''", run, run),
      fmt::format("gate --baseline {} --calibrate 1 --work ''", run),
  };
  for (const std::string& command : commands) {
    const auto result = parity(command, 60);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr("is empty: name the output")) << command;
  }
}

TEST_F(OutputFaults, CompareIntoTheReportFolderOfARunningRunIsRefusedNamingIt) {
  const fs::path out = temp_.path("running");
  BackgroundProcess running(
      kParity, {"run", "mlp2-fmnist", "--set", "parallel.replicas=2", "--set", "train.steps=100000",
                "--out", out.string()},
      temp_.path("running.log"));
  const fs::path job_folder = out / "mlp2-fmnist";
  ASSERT_TRUE(testing::eventually(
      [&] { return testing::count_lines(job_folder / "ddp" / "metrics.jsonl") >= 2; },
      std::chrono::seconds(120)))
      << running.output();

  const auto compared =
      parity(fmt::format("compare {} --report {}", runs(), (job_folder / "report").string()));
  EXPECT_EQ(compared.exit_code, 2) << compared.output;
  EXPECT_THAT(compared.output,
              HasSubstr(fmt::format("is inside {}, which is in use by another parity process "
                                    "(pid {}, `parity run mlp2-fmnist`",
                                    job_folder.string(), running.pid())));
  EXPECT_FALSE(fs::exists(job_folder / "report" / "report.json"));

  kill(running.pid(), SIGINT);
  const auto status = running.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(exit_code_of(*status), 128 + SIGINT) << running.output();
  EXPECT_FALSE(fs::exists(job_folder / "report" / "report.json"));
  EXPECT_FALSE(fs::exists(job_folder / "report" / "junit.xml"));
}

// A rerun stopped at once, before it could do anything, or just after it started: an old verdict
// may stay only beside the very runs it judged (the rerun never began); once the rerun has
// begun, no report.json or junit.xml of the old run is left.
TEST_F(OutputFaults, AnEarlyStopLeavesNoOldVerdictBesideOtherRuns) {
  const fs::path saved = temp_.path("saved");
  fs::copy(job(), saved, fs::copy_options::recursive);
  const std::string ddp_json = testing::read_bytes(saved / "ddp" / "run.json");
  const std::string pmap_json = testing::read_bytes(saved / "pmap" / "run.json");
  const fs::path out = temp_.path("out");
  const fs::path folder = out / "mlp2-fmnist";
  const std::vector<std::string> rerun = {"run", "mlp2-fmnist", "--set", "parallel.replicas=2",
                                          "--set", "train.steps=100000", "--out", out.string()};
  bool stopped_after_the_claim = false;
  for (const int delay_ms : {50, 200, 400, 600, -1}) {
    SCOPED_TRACE(fmt::format("SIGINT {}", delay_ms < 0 ? std::string("once the rerun holds "
                                                                      "the folder")
                                                       : fmt::format("after {} ms", delay_ms)));
    fs::remove_all(out);
    fs::create_directories(out);
    fs::copy(saved, folder, fs::copy_options::recursive);
    ASSERT_TRUE(fs::exists(folder / "report" / "junit.xml"));
    BackgroundProcess process(kParity, rerun, temp_.path("rerun.log"));
    if (delay_ms >= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    } else {
      // The lock file names the rerun once it holds the folder.
      ASSERT_TRUE(testing::eventually(
          [&] {
            return testing::read_bytes(folder / ".parity.lock")
                       .find(fmt::format("pid {},", process.pid())) != std::string::npos;
          },
          std::chrono::seconds(60)));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(process.pid(), SIGINT);
    const auto status = process.wait_for(std::chrono::seconds(60));
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(exit_code_of(*status), 128 + SIGINT) << process.output();
    const bool verdict_left = fs::exists(folder / "report" / "report.json") ||
                              fs::exists(folder / "report" / "junit.xml");
    if (verdict_left) {
      EXPECT_EQ(testing::read_bytes(folder / "ddp" / "run.json"), ddp_json);
      EXPECT_EQ(testing::read_bytes(folder / "pmap" / "run.json"), pmap_json);
    }
    if (delay_ms < 0) {
      stopped_after_the_claim = true;
      EXPECT_FALSE(verdict_left) << process.output();
    }
  }
  EXPECT_TRUE(stopped_after_the_claim);
}

// `nohup` starts a command with SIGHUP ignored: the hang-up must not end the run, in the
// launcher or its workers. Without the inherited ignore, it does (the control).
TEST_F(OutputFaults, ASighupInheritedAsIgnoredLeavesTheRunGoing) {
  for (const bool ignored : {true, false}) {
    SCOPED_TRACE(ignored ? "SIGHUP inherited as ignored" : "SIGHUP not ignored");
    const fs::path out = temp_.path(ignored ? "nohup" : "hup");
    const std::string command =
        fmt::format("{}exec {} ddp mlp2-fmnist --nproc 2 --set parallel.replicas=2 --set "
                    "train.steps=400 --out {} --quiet",
                    ignored ? "trap '' HUP; " : "", kParity, out.string());
    BackgroundProcess process("/bin/sh", {"-c", command}, temp_.path("hup.log"));
    ASSERT_TRUE(testing::eventually(
        [&] { return testing::count_lines(out / "metrics.jsonl") >= 3; },
        std::chrono::seconds(120)))
        << process.output();
    kill(process.pid(), SIGHUP);
    for (pid_t child : testing::children_of(process.pid())) kill(child, SIGHUP);
    const auto status = process.wait_for(std::chrono::seconds(180));
    ASSERT_TRUE(status.has_value());
    if (ignored) {
      EXPECT_EQ(exit_code_of(*status), 0) << process.output();
      EXPECT_EQ(read_run_dir(out).info.status, "complete");
    } else {
      EXPECT_EQ(exit_code_of(*status), 128 + SIGHUP) << process.output();
    }
  }
}

// oneDNN's verbose lines (DNNL_VERBOSE=1) stand in for any library's output in the workers:
// LibTorch's and Gloo's warnings take the same way, the workers' stdout and stderr.
TEST_F(OutputFaults, TheWorkersLibraryOutputGoesToTheRunsLogAndToTheConsoleWithVerbose) {
  for (const bool verbose : {false, true}) {
    SCOPED_TRACE(verbose ? "--verbose" : "without --verbose");
    const fs::path out = temp_.path(verbose ? "verbose" : "quiet");
    const auto run = testing::run_command(fmt::format(
        "DNNL_VERBOSE=1 {} ddp cnn-fmnist --nproc 2 --set parallel.replicas=2 --set "
        "train.steps=2 --set data.per_replica_batch=4 --out {} --quiet{}",
        kParity, out.string(), verbose ? " --verbose" : ""));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_THAT(testing::read_bytes(out / "worker.log"), HasSubstr("onednn_verbose"));
    if (verbose) {
      EXPECT_THAT(run.output, HasSubstr("onednn_verbose"));
    } else {
      EXPECT_THAT(run.output, Not(HasSubstr("onednn_verbose")));
    }
  }
}

TEST_F(OutputFaults, AFailingWorkersErrorStillReachesTheConsole) {
  const auto run = parity(fmt::format(
      "ddp mlp2-fmnist --nproc 2 {} --timeout 5 --inject-fault 1:2:throw --out {} --quiet",
      kSmall, temp_.path("fault").string()));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("rank 1 at step 2: injected fault (--inject-fault)"));
  EXPECT_THAT(run.output, HasSubstr("worker.log"));
}

TEST_F(OutputFaults, ARendezvousThatFailsSaysSoNotStepMinusOne) {
  // Rank 0 of two started alone, as torchrun would start it: it serves the store, and its
  // process group's rendezvous can never complete.
  const auto init = parity("init mlp2-fmnist --out " + temp_.path("init.safetensors").string());
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const int port = 20000 + getpid() % 20000;
  const auto run = testing::run_command(fmt::format(
      "RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} {} ddp mlp2-fmnist "
      "--set parallel.replicas=2 --timeout 2 --init {} --out {} --quiet",
      port, kParity, temp_.path("init.safetensors").string(), temp_.path("alone").string()));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("step -1")));
  EXPECT_THAT(run.output, HasSubstr(fmt::format(
                              "rank 0 before the first step: rendezvous with 2 ranks at "
                              "127.0.0.1:{}",
                              port)));
}

TEST_F(OutputFaults, ImportedTensorsOfAStepTheRunDoesNotHoldAreRefused) {
  const fs::path logged = temp_.path("metrics.jsonl");
  std::ofstream log(logged);
  for (int step = 0; step < 20; ++step) log << fmt::format("{{\"step\": {}, \"loss\": 1.0}}\n", step);
  log.close();
  const fs::path run = temp_.path("imported");
  const auto imported = parity(fmt::format(
      "import metrics {} --case mlp2-fmnist --map loss=loss --out {}", logged.string(),
      run.string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  const fs::path tensors = temp_.path("params.safetensors");
  ASSERT_EQ(parity("init mlp2-fmnist --out " + tensors.string()).exit_code, 0);

  const auto beyond = parity(fmt::format("import tensors {} --case mlp2-fmnist --kind params "
                                         "--step 25 --out {}",
                                         tensors.string(), run.string()));
  EXPECT_EQ(beyond.exit_code, 2) << beyond.output;
  EXPECT_THAT(beyond.output, HasSubstr("--step 25: the run directory " + run.string() +
                                       " holds no step 25 (its metrics.jsonl holds steps 0 to "
                                       "19)"));
  EXPECT_FALSE(fs::exists(step_tensors_path(run, 25)));
  const auto within = parity(fmt::format(
      "import tensors {} --case mlp2-fmnist --kind params --step 5 --out {}", tensors.string(),
      run.string()));
  EXPECT_EQ(within.exit_code, 0) << within.output;
}

TEST_F(OutputFaults, DropoutMasksIntoACaseWithoutDropoutAreRefused) {
  // A real run's rng.jsonl (mlp-fmnist-dropout records its masks) beside metrics to import.
  const fs::path dropout_run = temp_.path("dropout");
  const auto trained = parity(fmt::format(
      "ddp mlp-fmnist-dropout --set parallel.replicas=2 --set train.steps=2 --set "
      "data.per_replica_batch=16 --out {} --quiet",
      dropout_run.string()));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  ASSERT_TRUE(fs::exists(rng_streams_path(dropout_run)));
  const auto imported = parity(fmt::format(
      "import metrics {} --case mlp2-fmnist --set parallel.replicas=2 --map loss=loss --out {}",
      (dropout_run / "metrics.jsonl").string(), temp_.path("imported").string()));
  EXPECT_EQ(imported.exit_code, 2) << imported.output;
  EXPECT_THAT(imported.output, HasSubstr("holds dropout masks, but case mlp2-fmnist has no "
                                         "dropout"));
  EXPECT_FALSE(fs::exists(temp_.path("imported") / "run.json"));
}

}  // namespace
}  // namespace parity
