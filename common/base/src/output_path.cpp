#include "parity/common/output_path.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "parity/common/error.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

// "a symbolic link (to /etc/passwd)", or empty when `path` is no link (lstat: the link itself).
std::string describe_link(const fs::path& path) {
  std::error_code error;
  if (!fs::is_symlink(fs::symlink_status(path, error))) return "";
  const fs::path target = fs::read_symlink(path, error);
  return error ? "a symbolic link" : fmt::format("a symbolic link (to {})", target.string());
}

// Creates a temporary file beside `path` that nobody else can have planted: O_EXCL fails on any
// existing name, link or not. Returns the open descriptor and fills `temp_path`.
int create_temporary_beside(const fs::path& path, fs::path& temp_path) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path = path.parent_path() / fmt::format(".{}.tmp{}-{}", path.filename().string(),
                                                 getpid(), counter++);
    const int fd = open(temp_path.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

bool write_all(int fd, const std::string& contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t written = write(fd, contents.data() + done, contents.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    done += static_cast<size_t>(written);
  }
  return true;
}

}  // namespace

void require_output_name(const std::string& value, const std::string& option) {
  if (!value.empty()) return;
  throw InputError(fmt::format(
      "{} is empty: name the output (an empty name would write into the current folder)",
      option));
}

void check_output_file(const fs::path& path, const std::string& option, bool overwrite) {
  require_output_name(path.string(), option);
  const std::string link = describe_link(path);
  if (!link.empty()) {
    throw InputError(fmt::format(
        "{} {} is {}; parity neither writes through a link nor replaces one: name the file "
        "itself, or remove the link",
        option, path.string(), link));
  }
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (!fs::exists(status)) return;
  if (!fs::is_regular_file(status)) {
    throw InputError(fmt::format("{} {} is {}, not a file; name a file", option, path.string(),
                                 fs::is_directory(status) ? "a folder" : "something else"));
  }
  if (!overwrite) {
    throw InputError(fmt::format(
        "{} {} already exists; pass --overwrite to replace it, or choose another name", option,
        path.string()));
  }
}

std::string replace_file_without_following_links(const fs::path& path,
                                                  const std::string& contents) {
  fs::path temp_path;
  const int fd = create_temporary_beside(path, temp_path);
  if (fd < 0) return fmt::format("cannot create a file beside it ({})", std::strerror(errno));
  const bool written = write_all(fd, contents);
  const int write_errno = errno;
  const bool closed = close(fd) == 0;
  std::string failure;
  if (!written || !closed) failure = std::strerror(written ? errno : write_errno);
  // rename(2) would replace a link rather than write through it; refusing says so instead of
  // silently turning the user's link into a file.
  const std::string link = describe_link(path);
  if (failure.empty() && !link.empty()) {
    failure = fmt::format("it is {}; name the file itself, or remove the link", link);
  }
  std::error_code error;
  if (failure.empty()) {
    fs::rename(temp_path, path, error);
    if (!error) return "";
    failure = error.message();
  }
  fs::remove(temp_path, error);
  return failure;
}

void write_output_file(const fs::path& path, const std::string& contents,
                       const std::string& what) {
  const std::string failure = replace_file_without_following_links(path, contents);
  if (!failure.empty()) {
    throw InputError(fmt::format("cannot write {} {}: {}", what, path.string(), failure));
  }
}

}  // namespace parity
