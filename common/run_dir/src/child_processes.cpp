#include "parity/common/child_processes.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "parity/common/directory_lock.h"
#include "parity/common/error.h"
#include "parity/common/peer_processes.h"
#include "parity/common/run_dir.h"
#include "parity/common/termination.h"
#include "worker_log.h"

namespace parity {

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "stopped";
}

std::vector<std::string> run_child_processes(const std::filesystem::path& executable,
                                             const std::vector<std::string>& arguments,
                                             const std::vector<ChildProcess>& children,
                                             std::chrono::seconds grace,
                                             const std::filesystem::path& run_dir,
                                             bool show_output) {
  using Clock = std::chrono::steady_clock;
  const DirectoryLock lock(run_dir, fmt::format("launcher of {} processes", children.size()));
  const pid_t launcher = getpid();
  WorkerLog log(run_dir, fmt::format("launcher pid {}, {} processes", launcher, children.size()),
                show_output);
  const std::string launcher_text = std::to_string(launcher);
  std::map<pid_t, size_t> running;  // pid -> index in `children`
  for (size_t index = 0; index < children.size(); ++index) {
    const pid_t pid = fork();
    if (pid < 0) throw RunError("fork failed while starting " + children[index].label);
    if (pid == 0) {
      die_with_parent(launcher);
      log.redirect_child();
      setenv("PARITY_LAUNCHER_PID", launcher_text.c_str(), 1);
      for (const auto& [name, value] : children[index].env) setenv(name.c_str(), value.c_str(), 1);
      std::string program = executable.string();
      std::vector<std::string> copies = arguments;
      std::vector<char*> argv = {program.data()};
      for (auto& argument : copies) argv.push_back(argument.data());
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      std::_Exit(127);
    }
    running[pid] = index;
  }

  std::vector<std::string> failures;
  std::optional<Clock::time_point> deadline;
  // When each running child was first seen stopped (SIGSTOP, a debugger), while it stays so.
  std::map<pid_t, Clock::time_point> stopped_since;
  auto is_stopped = [](pid_t child) {
    return lost_process_state({host_name(), child}) == std::optional<std::string>("stopped");
  };
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      const size_t index = running[pid];
      running.erase(pid);
      stopped_since.erase(pid);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        failures.push_back(fmt::format("{} {}", children[index].label, describe_exit(status)));
        if (!deadline) deadline = Clock::now() + grace;
      }
      continue;
    }
    const auto now = Clock::now();
    if (deadline && now > *deadline) {
      for (const auto& [child, index] : running) {
        const bool stopped = is_stopped(child);
        kill(child, SIGKILL);
        failures.push_back(fmt::format(
            "{} was killed: {} {} s after the first failure", children[index].label,
            stopped ? "stopped (SIGSTOP or a debugger)" : "still running", grace.count()));
      }
      for (const auto& entry : running) waitpid(entry.first, &status, 0);
      break;
    }
    // A child stopped for `grace` is a failure even when no other has failed yet: the others
    // wait for it in a collective, and should one of them hang there instead of timing out, the
    // run would never end. Killing it closes its sockets, so their waits fail at once.
    for (auto it = running.begin(); it != running.end();) {
      const auto [child, index] = *it;
      if (!is_stopped(child)) {
        stopped_since.erase(child);
        ++it;
        continue;
      }
      const auto since = stopped_since.emplace(child, now).first->second;
      if (now - since < grace) {
        ++it;
        continue;
      }
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      failures.push_back(fmt::format("{} was killed: stopped (SIGSTOP or a debugger) for {} s",
                                     children[index].label, grace.count()));
      if (!deadline) deadline = now + grace;
      stopped_since.erase(child);
      it = running.erase(it);
    }
    log.forward();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  log.report_parity_lines();
  if (!failures.empty()) {
    mark_run_dir_incomplete(run_dir,
                            fmt::format("a worker process ended before it could record why: {}",
                                        fmt::join(failures, "; ")));
  }
  return failures;
}

}  // namespace parity
