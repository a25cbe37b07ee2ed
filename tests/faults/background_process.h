// A parity command started in the background, so that a test can signal it (or the processes it
// started) mid-run and then time how long it takes to end. The command's stdout and stderr go
// to a file, read once it has ended.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace parity::testing {

using Clock = std::chrono::steady_clock;

inline std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class BackgroundProcess {
 public:
  // Runs `program arguments...` with its output in `log`.
  BackgroundProcess(const std::string& program, const std::vector<std::string>& arguments,
                    std::filesystem::path log)
      : log_(std::move(log)), started_(Clock::now()) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<std::string> copies = arguments;
      std::vector<char*> argv;
      std::string name = program;
      argv.push_back(name.data());
      for (std::string& argument : copies) argv.push_back(argument.data());
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      std::_Exit(127);
    }
  }
  ~BackgroundProcess() {
    if (!status_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The wait status once it has ended, or nullopt when it still runs after `limit` (then it is
  // left running: the destructor kills it).
  std::optional<int> wait_for(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!status_ && Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = status;
        ended_ = Clock::now();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }

  // Seconds from `since` to its end (call after wait_for returned a status).
  double seconds_to_end(Clock::time_point since) const {
    return std::chrono::duration<double>(ended_ - since).count();
  }
  double seconds_run() const { return seconds_to_end(started_); }

  std::string output() const { return read_whole_file(log_); }

 private:
  std::filesystem::path log_;
  Clock::time_point started_;
  Clock::time_point ended_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// The processes whose parent is `parent` (from /proc/*/stat).
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_whole_file(entry.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    if (fields >> state >> ppid && ppid == parent && state != 'Z') {
      children.push_back(static_cast<pid_t>(std::stoi(name)));
    }
  }
  return children;
}

// The value of `name` in the environment `pid` was started with ("" when absent).
inline std::string environment_of(pid_t pid, const std::string& name) {
  const std::string environ = read_whole_file("/proc/" + std::to_string(pid) + "/environ");
  const std::string prefix = name + "=";
  size_t start = 0;
  while (start < environ.size()) {
    const size_t end = environ.find('\0', start);
    const std::string entry = environ.substr(start, end - start);
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// Whether `pid` still exists and has not ended (a zombie has ended).
inline bool is_alive(pid_t pid) {
  const std::string stat = read_whole_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Polls until `done()` or `limit` passes; returns whether it became true.
template <typename Predicate>
bool eventually(Predicate done, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Lines in a file (0 when it does not exist).
inline size_t count_lines(const std::filesystem::path& path) {
  const std::string text = read_whole_file(path);
  size_t lines = 0;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  return lines;
}

}  // namespace parity::testing
