// The files of a run directory (run_dir.h describes the layout), as its writer names them and its
// readers find them, and the tensor files recorded at a step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace parity {

inline constexpr const char* kRunJson = "run.json";
inline constexpr const char* kMetricsJsonl = "metrics.jsonl";
inline constexpr const char* kTensorsDir = "tensors";
inline constexpr const char* kStepTensorsPrefix = "step_";
inline constexpr const char* kIntermediatesPrefix = "intermediates_";

// The steps of the files tensors/PREFIXNNNNNN.safetensors, sorted.
std::vector<int64_t> list_recorded_steps(const std::filesystem::path& dir,
                                         const std::string& prefix);

}  // namespace parity
