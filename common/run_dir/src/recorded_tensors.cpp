// tensors/ of a run directory: step_NNNNNN.safetensors at the case's record steps and, for a
// layers model at its first record step, intermediates_NNNNNN.safetensors (write_safetensors,
// itself atomic), each carrying its step in its metadata.
#include "run_dir_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "parity/common/error.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

// "PREFIX000012" + suffix -> 12; nullopt for any other name (temp files, stray files).
std::optional<int64_t> step_of_file(const std::string& name, const std::string& prefix,
                                    const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size()) return std::nullopt;
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

fs::path recorded_file_path(const fs::path& dir, const std::string& prefix, int64_t step) {
  return dir / kTensorsDir / fmt::format("{}{:06d}.safetensors", prefix, step);
}

// Every file the writers put in tensors/ carries its step in its metadata (RunDirWriter, parity
// import tensors). A file whose metadata names another step was renamed or copied over another;
// one without it was not written there by parity. Either would be judged as the wrong step.
void check_recorded_step(const fs::path& path, const std::map<std::string, std::string>& metadata,
                         int64_t step) {
  const auto found = metadata.find("step");
  if (found != metadata.end() && found->second == std::to_string(step)) return;
  if (found == metadata.end()) {
    throw InputError(fmt::format(
        "{}: no \"step\" in its metadata, which every tensor file of a run directory carries: "
        "the file was not written by parity; rerun the producer, or import the tensors with "
        "parity import tensors",
        path.string()));
  }
  throw InputError(fmt::format(
      "{}: its metadata says step {}, its name step {}: the file was renamed or copied over "
      "another, so the run directory is damaged; rerun the producer",
      path.string(), found->second, step));
}

// The tensors of tensors/PREFIXNNNNNN.safetensors; InputError naming the steps that were recorded
// (`what`: "tensors", "layer outputs") when that file is not there.
NamedTensors read_recorded_file(const fs::path& dir, const std::string& prefix, int64_t step,
                                const std::string& what) {
  const fs::path path = recorded_file_path(dir, prefix, step);
  if (!fs::is_regular_file(path)) {
    std::ostringstream message;
    message << "no " << what << " recorded at step " << step << " in " << dir.string() << " (no "
            << path.filename().string() << "); recorded steps:";
    const std::vector<int64_t> recorded = list_recorded_steps(dir, prefix);
    if (recorded.empty()) message << " none";
    for (int64_t recorded_step : recorded) message << ' ' << recorded_step;
    throw InputError(message.str());
  }
  SafetensorsFile file = read_safetensors(path);
  check_recorded_step(path, file.metadata, step);
  return std::move(file.tensors);
}

}  // namespace

std::vector<int64_t> list_recorded_steps(const fs::path& dir, const std::string& prefix) {
  std::vector<int64_t> steps;
  const fs::path tensors_dir = dir / kTensorsDir;
  std::error_code error;
  if (!fs::is_directory(tensors_dir, error)) return steps;
  for (const auto& entry : fs::directory_iterator(tensors_dir)) {
    if (!entry.is_regular_file()) continue;
    if (const auto step = step_of_file(entry.path().filename().string(), prefix, ".safetensors"))
      steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}


fs::path step_tensors_path(const fs::path& dir, int64_t step) {
  return recorded_file_path(dir, kStepTensorsPrefix, step);
}

fs::path intermediates_path(const fs::path& dir, int64_t step) {
  return recorded_file_path(dir, kIntermediatesPrefix, step);
}

std::optional<int64_t> step_of_tensor_file(const std::string& name, const std::string& suffix) {
  return step_of_file(name, kStepTensorsPrefix, suffix);
}

NamedTensors read_step_tensors(const std::filesystem::path& dir, int64_t step) {
  return read_recorded_file(dir, kStepTensorsPrefix, step, "tensors");
}

NamedTensors read_step_intermediates(const std::filesystem::path& dir, int64_t step) {
  return read_recorded_file(dir, kIntermediatesPrefix, step, "layer outputs");
}

}  // namespace parity
