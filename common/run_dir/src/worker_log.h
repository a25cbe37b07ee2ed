// Where the worker processes of a multi-process run write their stdout and stderr: one file in
// the run directory, RUN_DIR/worker.log, not the console. What the libraries print there
// (LibTorch's and Gloo's warnings, glog's "Logging before InitGoogleLogging()") is noise to a
// person watching the run, so it is kept for reading later, or shown as it comes when asked;
// what parity itself says in a worker (its "parity: ..." error lines) always reaches the console.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parity {

inline constexpr const char* kWorkerLogFile = "worker.log";

class WorkerLog {
 public:
  // Opens RUN_DIR/worker.log for appending (a rerun adds to it after a line naming the launch;
  // a link there is refused, not followed). With `show`, forward() copies what the workers
  // write to this process's stderr. Throws RunError when the file cannot be opened.
  WorkerLog(const std::filesystem::path& run_dir, const std::string& launch, bool show);
  ~WorkerLog();
  WorkerLog(const WorkerLog&) = delete;
  WorkerLog& operator=(const WorkerLog&) = delete;

  // Between fork and exec: points the child's stdout and stderr at the log. Async-signal-safe.
  void redirect_child() const;

  // Copies what the workers wrote since the last call to stderr when showing; call it while
  // they run and once after they end.
  void forward();

  // After the workers ended: when not showing, copies parity's own lines of this launch
  // ("parity: ...", a worker's error) to stderr, with where the rest is. Showing, they have
  // been shown already.
  void report_parity_lines();

 private:
  std::filesystem::path path_;
  int write_fd_ = -1;
  int read_fd_ = -1;  // at the start of this launch's part
  bool show_ = false;
  std::string partial_line_;               // read, not yet a whole line (not showing)
  std::vector<std::string> parity_lines_;  // parity's own lines read (not showing)
};

}  // namespace parity
