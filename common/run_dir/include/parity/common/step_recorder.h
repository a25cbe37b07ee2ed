// The run directory's bookkeeping, shared by both producers so that they record the same things
// the same way: each step's metrics line (with the data-order digests), the tensors at the
// case's record steps (grads/, params/, batch_stats/, replicas/param_digests), and run.json's timings, memory
// and results at the end. The producers compute the numbers; this writes them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"

namespace parity {

// What a producer measured in one optimizer step.
struct StepRecord {
  int64_t step = 0;
  double loss = 0;                     // global mean over every replica's samples
  // Each replica's mean over its own samples; empty for a step that computes the global loss
  // only (a jit over the global batch).
  std::vector<double> replica_losses;
  double grad_norm = 0;                // of the reduced gradient
  double param_norm = 0;               // after the update
  double step_seconds = 0;
  std::vector<int64_t> global_sample_ids;  // the step's global batch, in the producer's order
  std::vector<MaskDraw> rng_draws;  // every replica's dropout masks (none without dropout)
};

// At the end of a run.
struct RunTotals {
  double setup_seconds = 0;
  std::vector<double> step_seconds;
  MemoryReport memory;
  std::map<std::string, double> results;  // final_loss, test_accuracy, ...
};

class StepRecorder {
 public:
  // `writer` is null in a process or rank that does not write the run directory: it then
  // records nothing, but still checks the losses, so that every replica stops at the same step.
  // `replica_unit` names a replica in messages: "rank" (ddp_ref) or "device" (the engine).
  StepRecorder(const CaseSpec& spec, RunDirWriter* writer, std::string replica_unit);

  bool writes() const { return writer_ != nullptr; }
  // Whether the case records tensors at `step` (train.record_steps).
  bool records_tensors(int64_t step) const;

  // RunError naming the step and each replica whose loss is not finite (NaN, inf), or the global
  // loss when there are no replica losses; the run directory is then marked incomplete with the
  // same words.
  void check_losses_finite(const StepRecord& record) const;
  // The step's RNG streams (rng.jsonl), then its metrics line (the case's lr; digests of the
  // global sample ids).
  void record_step(const StepRecord& record) const;
  // The step's tensors: grads/NAME, params/NAME, batch_stats/NAME (model state: BatchNorm's
  // running statistics, of the replica whose params are recorded; none for a model without
  // BatchNorm) and every replica's parameter digest (digest_named_tensors, carried bit for bit
  // in I64 slots).
  void record_tensors(int64_t step, const NamedTensors& grads, const NamedTensors& params,
                      const NamedTensors& batch_stats,
                      const std::vector<uint64_t>& replica_param_digests) const;
  // Whether this process records layer outputs at `step`: it writes the run, the case is a layers
  // model that records them (records_intermediates) and `step` is its first record step.
  bool records_intermediates(int64_t step) const;
  // tensors/intermediates_NNNNNN.safetensors: `input`, the batch the outputs were computed from,
  // as "input", and each layer output as "intermediates/PATH". `outputs` must hold exactly the
  // paths of layer_intermediates(model), each [batch, shape...] (InternalError otherwise: the
  // two producers' files are compared name by name).
  void record_intermediates(int64_t step, const HostTensor& input,
                            const NamedTensors& outputs) const;
  // run.json's timings, memory and results; status "complete".
  void finish(const RunTotals& totals) const;

 private:
  const CaseSpec& spec_;
  RunDirWriter* writer_;
  std::string replica_unit_;
};

}  // namespace parity
