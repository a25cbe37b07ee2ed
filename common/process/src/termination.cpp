#include "parity/common/termination.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

namespace parity {
namespace {

std::mutex& actions_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<int, std::function<void(const std::string&)>>& actions() {
  static std::map<int, std::function<void(const std::string&)>> registered;
  return registered;
}

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// The handler only writes the signal and its sender into a pipe (async-signal-safe); the watcher
// thread reads it and does the real work. Any thread may take the signal, including threads
// that libraries start before main (OpenBLAS's pool), so masking signals could not work.
int stop_pipe[2] = {-1, -1};

// What the handler passes on: the signal and who sent it (one write, under PIPE_BUF: atomic).
struct StopNote {
  int signal;
  pid_t sender;
};

extern "C" void on_stop_signal(int signal, siginfo_t* info, void*) {
  const StopNote note{signal, info != nullptr ? info->si_pid : 0};
  const int saved_errno = errno;
  [[maybe_unused]] const ssize_t written = write(stop_pipe[1], &note, sizeof note);
  errno = saved_errno;
}

std::string describe_stop(const StopNote& note) {
  const int signal = note.signal;
  const int launcher = launcher_pid_from_environment();
  // PR_SET_PDEATHSIG's SIGTERM is sent by the dying launcher itself (si_pid is its pid; the
  // launcher never sends SIGTERM otherwise). getppid() alone cannot tell: while the launcher's
  // other threads are still exiting, this process is re-parented to one of them, same pid.
  if (signal == SIGTERM && launcher > 0 && (note.sender == launcher || getppid() != launcher)) {
    return fmt::format("stopped because its launcher (pid {}) died", launcher);
  }
  switch (signal) {
    case SIGINT:
      return "interrupted by SIGINT (Ctrl-C)";
    case SIGTERM:
      return "terminated by SIGTERM";
    case SIGHUP:
      return "stopped by SIGHUP (its terminal closed)";
    default:
      return fmt::format("stopped by signal {}", signal);
  }
}

[[noreturn]] void watch_stop_signals() {
  StopNote note{};
  while (read(stop_pipe[0], &note, sizeof note) != static_cast<ssize_t>(sizeof note)) {
  }
  const int signal = note.signal;
  const std::string reason = describe_stop(note);
  {
    std::lock_guard<std::mutex> lock(actions_mutex());
    for (auto it = actions().rbegin(); it != actions().rend(); ++it) it->second(reason);
  }
  // End with the signal's own status, as the default action would have: a shell or launcher
  // sees "killed by SIGTERM", not an exit code that could mean anything.
  ::signal(signal, SIG_DFL);
  raise(signal);
  std::_Exit(128 + signal);
}

}  // namespace

void install_termination_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(stop_pipe, O_CLOEXEC) != 0) return;  // keep the default actions
    std::thread(watch_stop_signals).detach();
    struct sigaction action {};
    action.sa_sigaction = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_SIGINFO;
    for (int signal : kStopSignals) {
      // A signal this process was started with ignored stays ignored, as POSIX shells and
      // Python leave it: `nohup parity run` must outlive its terminal, and a job started in the
      // background of a non-interactive shell is not to be stopped by the terminal's Ctrl-C.
      struct sigaction inherited {};
      if (sigaction(signal, nullptr, &inherited) == 0 &&
          (inherited.sa_flags & SA_SIGINFO) == 0 && inherited.sa_handler == SIG_IGN) {
        continue;
      }
      sigaction(signal, &action, nullptr);
    }
  });
}

TerminationAction::TerminationAction(std::function<void(const std::string&)> action) {
  static int next_id = 0;
  std::lock_guard<std::mutex> lock(actions_mutex());
  id_ = next_id++;
  actions()[id_] = std::move(action);
}

TerminationAction::~TerminationAction() {
  std::lock_guard<std::mutex> lock(actions_mutex());
  actions().erase(id_);
}

void die_with_parent(int parent) {
  // An ignored SIGTERM is inherited through exec, and the child would then outlive its launcher;
  // the death signal is the launcher's, not the user's, so it is restored here.
  ::signal(SIGTERM, SIG_DFL);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The launcher may have died between fork and prctl; then nobody would send the signal.
  if (getppid() != parent) std::_Exit(128 + SIGTERM);
}

int launcher_pid_from_environment() {
  const char* text = std::getenv("PARITY_LAUNCHER_PID");
  if (text == nullptr) return 0;
  return std::atoi(text);
}

}  // namespace parity
