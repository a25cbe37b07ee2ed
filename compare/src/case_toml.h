// The case a run trained, as run.json records it (case.toml: the canonical TOML with overrides
// applied), read back for the two things compare needs: which keys differ between two runs'
// cases, and the global batch per optimizer step. common/ offers load_case for files only, so the
// text is parsed here with the same TOML library.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/run_dir.h"

namespace parity::compare {

// "section.key" -> the value as TOML text ("10", "\"adam\"", "[0, 9]"), a layer's keys one by one
// ("model.layers[2].momentum" -> "0.99"). Empty for a run without case text (an importer may
// not have one); InputError naming run.json when it does not parse.
std::map<std::string, std::string> case_keys(const RunDir& run);

// One line per key whose value differs between two runs' case keys, sorted by key:
// "train.lr: A 0.001, B 0.002" with the labels given ("(absent)" for a key one side lacks).
std::vector<std::string> differing_case_keys(const std::map<std::string, std::string>& a,
                                             const std::map<std::string, std::string>& b,
                                             const std::string& label_a = "A",
                                             const std::string& label_b = "B");

// The key of each line differing_case_keys made: "train.lr", ...
std::vector<std::string> differing_key_names(const std::vector<std::string>& lines);

// parallel.replicas x data.per_replica_batch x train.grad_accum_steps: the samples one optimizer
// step trains on. nullopt when the case text lacks them.
std::optional<int64_t> global_batch(const RunDir& run);

}  // namespace parity::compare
