#include "atomic_write.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "parity/common/error.h"

namespace parity::reports {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFix =
    "Write the reports to a directory you can write to, or fix this one's permissions.";

[[noreturn]] void fail(const std::string& what, const fs::path& path, const std::string& why) {
  throw InputError(what + " " + path.string() + ": " + why + ". " + kFix);
}

}  // namespace

void create_report_directory(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail("cannot create the report directory", dir, error.message());
}

void write_file_atomically(const fs::path& path, const std::string& contents) {
  // Hidden, and unique per process, so that two writers never share a temporary file.
  const fs::path temp_path =
      path.parent_path() / ("." + path.filename().string() + ".tmp" + std::to_string(getpid()));
  std::string failure;
  {
    std::ofstream out(temp_path, std::ios::binary | std::ios::trunc);
    if (out) out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (out) out.close();
    if (!out) failure = std::strerror(errno);
  }
  std::error_code error;
  if (failure.empty()) {
    fs::rename(temp_path, path, error);
    if (!error) return;
    failure = error.message();
  }
  fs::remove(temp_path, error);
  fail("cannot write the report file", path, failure);
}

void remove_report_files(const fs::path& dir, const std::vector<const char*>& names) {
  for (const char* name : names) {
    std::error_code error;
    fs::remove(dir / name, error);
    if (error) fail("cannot remove the old report", dir / name, error.message());
  }
}

void write_report_files(const fs::path& dir, const std::vector<ReportFile>& files) {
  create_report_directory(dir);
  std::vector<const char*> names;
  for (const ReportFile& file : files) names.push_back(file.name);
  remove_report_files(dir, names);
  try {
    for (const ReportFile& file : files) write_file_atomically(dir / file.name, file.contents);
  } catch (const InputError&) {
    std::error_code ignored;
    for (const char* name : names) fs::remove(dir / name, ignored);
    throw;
  }
}

}  // namespace parity::reports
