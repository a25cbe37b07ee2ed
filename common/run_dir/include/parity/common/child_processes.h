// Starting a multi-process run on one host: copies of this executable, each with its own
// environment (RANK for ddp_ref, the coordinator and process id for the engine), watched until
// all exit. Shared by `parity ddp --nproc` and `parity pmap --nproc`.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace parity {

struct ChildProcess {
  std::string label;                       // "process 1 (ranks 4..7)", for messages
  std::map<std::string, std::string> env;  // set in the child before exec
};

// Runs `executable arguments...` once per child and waits for all; the children write one run
// directory, `run_dir`. When one fails, the others get `grace` to finish (a collective timeout
// and time to write their report) before they are killed. A child stopped (SIGSTOP, a
// debugger) for `grace` is killed as a failure too, so a run ends even when its peers would
// wait for it for ever. Returns one line per child that did not exit 0, in the order they
// ended (the first is the likely cause); empty when all did.
// The children's stdout and stderr go to RUN_DIR/worker.log, not the console (the libraries'
// warnings); their "parity: ..." lines (a worker's error) are copied to stderr at the end, and
// with `show_output` everything is, as it comes.
// Throws RunError when a child cannot be started.
//
// The launcher holds run_dir's DirectoryLock for the whole run (its children work under it),
// its death takes the children with it (they get SIGTERM: die_with_parent), and when a child
// died before it could say so (the run still says "running"), it marks the run incomplete
// with the failures.
std::vector<std::string> run_child_processes(const std::filesystem::path& executable,
                                             const std::vector<std::string>& arguments,
                                             const std::vector<ChildProcess>& children,
                                             std::chrono::seconds grace,
                                             const std::filesystem::path& run_dir,
                                             bool show_output = false);

// "exited with code 3", "was killed by signal 9".
std::string describe_exit(int status);

}  // namespace parity
