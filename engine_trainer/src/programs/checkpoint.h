// Checkpoints of the engine trainer, as seed 002 §4.3 describes them for replicated data
// parallelism: the parameters and optimizer state are the same on every device, so one copy
// (device 0's, params[0] in JAX) is saved, with the step to resume at and the device count and
// process it was saved from; a restore replicates that copy onto however many devices the
// resumed run has. (Sharded parameters would be all_gathered first; the case models replicate.)
//
// File: safetensors. Tensors "params/<leaf path>" and "opt_state/<leaf path>" in their own
// dtypes (f32/f64 values, Adam's i32 step count), metadata {"format": "parity-checkpoint",
// "schema_version": "1", "step", "device_count", "process_index", "process_count"}.
#pragma once

#include <filesystem>

#include "pmap_engine/tree.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

struct Checkpoint {
  int64_t step = 0;          // the first step the resumed run trains
  int64_t device_count = 0;  // devices of the run that saved it
  pe::Tree params;           // one replica, no device axis
  pe::Tree opt_state;        // likewise
};

// Writes atomically (safetensors' writer: temporary file, then rename).
void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);

// Reads a checkpoint whose trees have the structure, shapes and dtypes of `params_like` and
// `state_like` (the resuming run's own initial values). Throws InputError naming the file and
// the tensor that is missing or differs.
Checkpoint load_checkpoint(const std::filesystem::path& path, const pe::Tree& params_like,
                           const pe::Tree& state_like);

}  // namespace parity::engine_trainer
