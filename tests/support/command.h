// Runs a shell command from a test, with a wall-clock limit, and captures what it printed.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace parity::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

// Single-quotes `text` for the shell.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `command` runs under bash with `timeout`; exit code 124 means it ran out of time.
inline CommandResult run_command(const std::string& command, int timeout_seconds = 300) {
  std::string wrapped = "timeout -k 5 " + std::to_string(timeout_seconds) + " bash -c " +
                        shell_quote(command) + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(wrapped.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t count = 0;
  while ((count = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), count);
  }
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// A fresh, empty directory for one test.
inline std::filesystem::path fresh_directory(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("parity-test-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace parity::testing
