// What a run directory promises beyond its lines: run.json's steps, and for a producer's run its
// case's tensor files. A "complete" run that lacks any of them is read as incomplete (the
// comparison then says exit 3, naming what is missing); more lines than promised is damage.
#pragma once

#include "parity/common/run_dir.h"

namespace parity {

// InputError when metrics.jsonl holds more steps than run.json promises. A "complete" run is
// demoted to "incomplete", its failure naming what is missing, when it holds fewer steps, or
// (a producer's run of schema 3 on) lacks a tensor file its case's train.record_steps promise:
// tensors/step_NNNNNN.safetensors at each record step, and a layers model's layer outputs
// (tensors/intermediates_NNNNNN.safetensors) at the first. Imports record only what was
// imported; older schemas predate layer outputs; neither is held to the case's record steps.
void hold_to_promises(RunDir& run);

}  // namespace parity
