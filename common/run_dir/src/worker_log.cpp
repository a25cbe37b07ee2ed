#include "worker_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "parity/common/error.h"
#include "parity/common/utc_timestamp.h"

namespace parity {

WorkerLog::WorkerLog(const std::filesystem::path& run_dir, const std::string& launch, bool show)
    : path_(run_dir / kWorkerLogFile), show_(show) {
  write_fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (write_fd_ < 0) {
    throw RunError(fmt::format("cannot open the workers' log {}: {}", path_.string(),
                               std::strerror(errno)));
  }
  read_fd_ = open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (read_fd_ >= 0) lseek(read_fd_, 0, SEEK_END);
  const std::string header = fmt::format("== {}, {} ==\n", launch, utc_timestamp_now());
  [[maybe_unused]] const ssize_t written = write(write_fd_, header.data(), header.size());
}

WorkerLog::~WorkerLog() {
  if (write_fd_ >= 0) close(write_fd_);
  if (read_fd_ >= 0) close(read_fd_);
}

void WorkerLog::redirect_child() const {
  dup2(write_fd_, STDOUT_FILENO);
  dup2(write_fd_, STDERR_FILENO);
}

void WorkerLog::forward() {
  if (read_fd_ < 0) return;
  char buffer[4096];
  ssize_t count = 0;
  while ((count = read(read_fd_, buffer, sizeof buffer)) > 0) {
    if (show_) {
      std::cerr.write(buffer, count);
      continue;
    }
    // Only parity's own lines are kept, so that a chatty library costs no memory here.
    partial_line_.append(buffer, static_cast<size_t>(count));
    size_t end = 0;
    while ((end = partial_line_.find('\n')) != std::string::npos) {
      if (partial_line_.rfind("parity: ", 0) == 0) {
        parity_lines_.push_back(partial_line_.substr(0, end));
      }
      partial_line_.erase(0, end + 1);
    }
  }
  std::cerr.flush();
}

void WorkerLog::report_parity_lines() {
  forward();
  if (partial_line_.rfind("parity: ", 0) == 0) parity_lines_.push_back(partial_line_);
  partial_line_.clear();
  if (parity_lines_.empty()) return;
  for (const std::string& line : parity_lines_) std::cerr << line << "\n";
  std::cerr << fmt::format("parity: the workers' whole output is in {} (--verbose shows it)\n",
                           path_.string());
  parity_lines_.clear();
}

}  // namespace parity
