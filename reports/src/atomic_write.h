// Writing a report file so that a reader never sees half of it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parity::reports {

// Writes `contents` to `path` with parity::write_output_file (atomic, no link followed): `path`
// holds the old contents or the new, never a mix. Throws parity::InputError naming the file and
// the fix when it cannot be written.
void write_file_atomically(const std::filesystem::path& path, const std::string& contents);

// Creates `dir` and its parents when missing; throws parity::InputError when that fails, which
// includes `dir` (or a parent) being a file.
void create_report_directory(const std::filesystem::path& dir);

struct ReportFile {
  const char* name;  // inside the report directory
  std::string contents;
};

// Creates `dir` and writes each file into it atomically, as above, all or nothing: the old files
// are removed first, and when one of the new cannot be written the others are removed too, so
// `dir` never holds a mix of two runs' reports. Callers render every file first, so a renderer
// that throws leaves the old reports untouched.
void write_report_files(const std::filesystem::path& dir, const std::vector<ReportFile>& files);

// Removes `names` from `dir` where they exist; InputError naming the file when one cannot be.
void remove_report_files(const std::filesystem::path& dir, const std::vector<const char*>& names);

}  // namespace parity::reports
