// Finding case files: by name in cases_dir(), or by path.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parity {

// The case file `name_or_path` means: a path when it contains '/' or ends in .toml, else
// cases_dir()/NAME.toml. Throws InputError when there is no such regular file (an unknown name
// lists the available cases and suggests a near miss).
std::filesystem::path resolve_case_file(const std::string& name_or_path);

// The stems of the *.toml files in `dir`, sorted.
std::vector<std::string> available_case_names(const std::filesystem::path& dir);

}  // namespace parity
