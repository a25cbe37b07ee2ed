#include "atomic_write.h"

#include <system_error>

#include "parity/common/error.h"
#include "parity/common/output_path.h"

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
  try {
    write_output_file(path, contents, "the report file");
  } catch (const InputError& error) {
    throw InputError(std::string(error.what()) + ". " + kFix);
  }
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
