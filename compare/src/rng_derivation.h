// The RNG check's derivation part: every key a run recorded with its masks (rng.jsonl), recomputed
// from the run's case (run.json's case.toml: [rng] seed, per_step, per_device) with the host
// threefry as a JAX user's step derives it (parity::DropoutKeys; docs/rng.md, "Dropout streams").
// A producer whose keys differ from its case's derivation did not draw the stream the case
// declares, whatever the masks' statistics say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "parity/common/run_dir.h"

namespace parity::compare {

struct KeyDerivation {
  // Why the run's keys were not recomputed (no keys, no case text); nullopt when they were.
  std::optional<std::string> skipped;
  int64_t recomputed = 0;
  int64_t mismatches = 0;
  // The first mismatch (by step, site, replica): its step and a line naming run, step, replica,
  // site, the recorded and the derived key words.
  std::optional<int64_t> first_mismatch_step;
  std::optional<std::string> first_mismatch;
};

// `label`: "A" or "B", as the check's lines name the run. The run's draws must be sorted by step
// (read_rng_streams sorts them).
KeyDerivation derive_recorded_keys(char label, const RunDir& run);

}  // namespace parity::compare
