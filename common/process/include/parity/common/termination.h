// What a parity process does when it is told to stop (Ctrl-C, SIGTERM, SIGHUP, or the death of
// the launcher that started it): every run directory it is writing is marked incomplete with
// the reason, and only then does the process end, with the signal's usual status. Without
// this a killed run stays "running" for ever and a reader cannot tell it from one in progress.
//
// How: install_termination_handler(), called once by main, catches the signals with a handler
// that only wakes a thread of its own, so the cleanup runs as ordinary code (it may allocate
// and write files), never inside a signal handler.
#pragma once

#include <functional>
#include <string>

namespace parity {

// Catches SIGINT, SIGTERM and SIGHUP and starts the thread that acts on them; a signal the
// process was started with ignored (`nohup` ignores SIGHUP) is left ignored. Idempotent. A
// process that never calls it keeps the default actions: the library code works the same
// either way.
void install_termination_handler();

// Registers an action for as long as it lives. On a stop signal every registered action is
// called (newest first) with a sentence saying what happened, e.g. "interrupted by SIGINT
// (Ctrl-C)" or "stopped because its launcher (pid 1234) died". Actions must not throw.
class TerminationAction {
 public:
  explicit TerminationAction(std::function<void(const std::string& reason)> action);
  ~TerminationAction();
  TerminationAction(const TerminationAction&) = delete;
  TerminationAction& operator=(const TerminationAction&) = delete;

 private:
  int id_;
};

// Makes a child about to exec (call it between fork and exec) receive SIGTERM when the process
// that forked it dies, so that a killed launcher takes its workers with it (PR_SET_PDEATHSIG).
// `parent` is the launcher's pid, read before fork: when it has already died the child exits.
// Async-signal-safe.
void die_with_parent(int parent);

// The launcher's pid a child of die_with_parent() was started by, from the environment it was
// given (PARITY_LAUNCHER_PID), or 0 when it was not started that way.
int launcher_pid_from_environment();

}  // namespace parity
