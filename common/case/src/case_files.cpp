#include "case_files.h"

#include <algorithm>

#include "case_errors.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"

namespace parity {

namespace {

// Whether `file` names anything, following links. A link that cannot be followed (a loop of
// links, ELOOP; a path through a file, ENOTDIR) is an error about the path, not a missing file:
// std::filesystem::exists would throw filesystem_error for it.
bool case_path_exists(const std::filesystem::path& file) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(file, error);
  if (error && status.type() != std::filesystem::file_type::not_found) {
    throw InputError("case file " + file.string() + " cannot be read: " + error.message() +
                     "; give the path of a .toml case file (if it is a link, point it at one)");
  }
  return std::filesystem::exists(status);
}

// A case is read from a regular file (or a link to one): a directory named x.toml would
// otherwise read as an empty table and fail as "model.widths is required".
void require_regular_file(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::is_regular_file(file, error)) return;
  const std::filesystem::file_status status = std::filesystem::status(file, error);
  const char* what = status.type() == std::filesystem::file_type::directory ? "a directory"
                                                                            : "not a regular file";
  throw InputError("case file " + file.string() + " is " + what +
                   "; give the path of a .toml case file (or a case name from " +
                   cases_dir().string() + ")");
}

}  // namespace

std::vector<std::string> available_case_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::filesystem::path resolve_case_file(const std::string& name_or_path) {
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       std::filesystem::path(name_or_path).extension() == ".toml";
  if (is_path) {
    if (!case_path_exists(name_or_path)) {
      throw InputError("case file " + name_or_path + " not found");
    }
    require_regular_file(name_or_path);
    return name_or_path;
  }
  const std::filesystem::path dir = cases_dir();
  std::filesystem::path file = dir / (name_or_path + ".toml");
  if (case_path_exists(file)) {
    require_regular_file(file);
    return file;
  }
  const std::vector<std::string> names = available_case_names(dir);
  std::string message = "unknown case '" + name_or_path + "'; available cases in " +
                        dir.string() + ": " + (names.empty() ? "(none)" : join(names));
  const std::string guess = did_you_mean(name_or_path, names);
  if (!guess.empty()) message += "; " + guess;
  throw InputError(message);
}

}  // namespace parity
