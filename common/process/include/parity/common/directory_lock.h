// One parity process at a time in an output folder. Two runs writing the same folder mix their
// steps and reports (seen: two `parity run --out same` at once both exited 0, one reporting
// "all 88 steps compared" for a 100-step case). The lock is flock(2) on DIR/.parity.lock, so it
// is released by the kernel when its holder exits, however it exits: no stale lock survives a
// killed run. The file also says who holds it, for the message the second process prints.
#pragma once

#include <filesystem>
#include <string>

namespace parity {

class DirectoryLock {
 public:
  // Creates `dir` when missing and locks it. Throws InputError when another process holds the
  // lock of `dir` or of a folder above it (everything under a held folder is its holder's:
  // `parity compare --report` into a running `parity run`'s report folder is refused), naming
  // its pid, its command and when it started, and the fix; or when `dir` cannot be created or
  // locked. Two holders are not in conflict: this process itself (one job nested
  // in another locks the same folder twice), and the launcher that started this process (a
  // worker of `--nproc N` writes the folder its launcher locked for the whole run).
  DirectoryLock(const std::filesystem::path& dir, const std::string& command);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  std::string key_;  // the lock file's canonical path
};

}  // namespace parity
