// What the rules of the framework defaults (default_rules.h) read of a run's recorded steps: a
// step's F32 and F64 tensors as doubles by name, and the first step both runs recorded, with
// the statistics the rules share.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checks.h"

namespace parity::compare {

// One recorded tensor of a run, as doubles.
struct Recorded {
  Shape shape;
  std::vector<double> values;
};
// One recorded step of a run: its F32 and F64 tensors by name ("params/...", "grads/...").
using StepValues = std::map<std::string, Recorded>;

StepValues read_values(const RunDir& run, int64_t step);

bool recorded(const RunDir& run, int64_t step);

// The runs' first step, when both recorded its tensors: the step both runs began from their
// initial parameters, optimizer state and running statistics.
std::optional<int64_t> first_step_recorded(const RunPair& runs);

double median(std::vector<double> values);
double root_mean_square(const std::vector<double>& values);

inline bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace parity::compare
