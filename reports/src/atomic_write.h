// Writing a report file so that a reader never sees half of it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parity::reports {

// Writes `contents` to a temporary file next to `path` and renames it over `path`: rename within
// one directory is atomic, so `path` holds the old contents or the new, never a mix. The
// temporary file is removed when anything fails. Throws parity::InputError naming the file and
// the fix when the directory cannot be written.
void write_file_atomically(const std::filesystem::path& path, const std::string& contents);

// Creates `dir` and its parents when missing; throws parity::InputError when that fails, which
// includes `dir` (or a parent) being a file.
void create_report_directory(const std::filesystem::path& dir);

struct ReportFile {
  const char* name;  // inside the report directory
  std::string contents;
};

// Creates `dir` and writes each file into it atomically, as above. Callers render every file
// first, so a renderer that throws leaves nothing behind.
void write_report_files(const std::filesystem::path& dir, const std::vector<ReportFile>& files);

}  // namespace parity::reports
