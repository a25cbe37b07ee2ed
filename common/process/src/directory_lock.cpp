#include "parity/common/directory_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>

#include "parity/common/error.h"
#include "parity/common/termination.h"
#include "parity/common/utc_timestamp.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLockFile = ".parity.lock";

// The folders this process holds, with how many DirectoryLocks share each. flock(2) locks
// belong to open files, so a second open of the same lock file in one process would conflict
// with the first: the process opens it once and counts. fd is -1 for a folder the launcher
// holds for us.
struct Held {
  int fd = -1;
  int count = 0;
};
std::mutex held_mutex;
std::map<std::string, Held> held_by_this_process;

std::string read_holder(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string holder = text.str();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder;
}

// "pid 1234, ..." -> 1234; 0 when the holder has not written its line yet.
int holder_pid(const std::string& holder) {
  int pid = 0;
  return std::sscanf(holder.c_str(), "pid %d", &pid) == 1 ? pid : 0;
}

// True when `holder` (the line read from a lock file) is the launcher that started this process.
bool held_by_launcher(const std::string& holder) {
  const int launcher = launcher_pid_from_environment();
  return launcher > 0 && holder_pid(holder) == launcher;
}

InputError in_use(const fs::path& dir, const fs::path& held, const std::string& holder) {
  const std::string where =
      held == dir ? "" : fmt::format(" is inside {}, which", held.string());
  return InputError(fmt::format(
      "the output folder {}{} is in use by another parity process ({}); wait for it to end, or "
      "give this command another output folder",
      dir.string(), where, holder.empty() ? "it has not said who it is yet" : holder));
}

// A parity process writes everything under the folder it locked (`parity run` its report
// folder, a launcher its workers' run), so a folder above `dir` that another process holds puts
// `dir` in use too. Throws InputError naming that process. Called with held_mutex held.
void refuse_when_a_folder_above_is_held(const fs::path& dir) {
  const fs::path canonical = fs::weakly_canonical(dir);
  for (fs::path folder = canonical.parent_path();; folder = folder.parent_path()) {
    const fs::path path = folder / kLockFile;
    if (held_by_this_process.count(path.string()) == 0) {
      const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        // A shared lock, released at once by close: only a holder's exclusive lock refuses it.
        const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        close(fd);
        const std::string holder = held ? read_holder(path) : "";
        if (held && !held_by_launcher(holder)) throw in_use(dir, folder, holder);
      }
    }
    if (folder == folder.parent_path()) return;
  }
}

// Opens and locks `path`; returns the open file, or -1 when the launcher of this process holds
// it. Throws InputError when anyone else does.
int acquire(const fs::path& dir, const fs::path& path, const std::string& command) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InputError(fmt::format("cannot lock the output folder {}: {} ({}); choose a folder you "
                                 "can write to",
                                 dir.string(), path.string(), std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int lock_errno = errno;
    close(fd);
    if (lock_errno != EWOULDBLOCK) {
      throw InputError(fmt::format("cannot lock the output folder {}: {}", dir.string(),
                                   std::strerror(lock_errno)));
    }
    const std::string holder = read_holder(path);
    if (held_by_launcher(holder)) return -1;
    throw in_use(dir, dir, holder);
  }
  const std::string line =
      fmt::format("pid {}, `{}`, since {}\n", getpid(), command, utc_timestamp_now());
  if (ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t written = pwrite(fd, line.data(), line.size(), 0);
  }
  return fd;
}

}  // namespace

DirectoryLock::DirectoryLock(const fs::path& dir, const std::string& command) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir)) {
    throw InputError(fmt::format(
        "cannot use {} as an output folder: {}; choose a folder you can write to", dir.string(),
        error ? error.message() : "it is not a folder"));
  }
  const fs::path path = dir / kLockFile;
  key_ = fs::weakly_canonical(path).string();
  std::lock_guard<std::mutex> lock(held_mutex);
  auto found = held_by_this_process.find(key_);
  if (found == held_by_this_process.end()) {
    refuse_when_a_folder_above_is_held(dir);
    found = held_by_this_process.emplace(key_, Held{acquire(dir, path, command), 0}).first;
  }
  ++found->second.count;
}

DirectoryLock::~DirectoryLock() {
  std::lock_guard<std::mutex> lock(held_mutex);
  const auto found = held_by_this_process.find(key_);
  if (found == held_by_this_process.end() || --found->second.count > 0) return;
  if (found->second.fd >= 0) close(found->second.fd);  // releases the flock
  held_by_this_process.erase(found);
}

}  // namespace parity
