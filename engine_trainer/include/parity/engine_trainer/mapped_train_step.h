// The train step as the trainer runs it, spread over the devices as the case's parallel.style
// and engine program say: pmap (make_pmap_train_step), jax.shard_map for a program that
// runs_under_shard_map, or jax.jit with shardings (parallel.style jit-dp, jit-fsdp). pmap and
// shard_map take and return make_pmap_train_step's layout, every argument and result with a
// leading device axis; jit takes and returns global values (StepLayout says which).
// MappedTrainStep is the one interface of the three: src/shard_map_train_step.h and
// src/jit_train_step.h hold only what their steps add (the layout conversion, the shardings).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/optim.h"

namespace parity::engine_trainer {

class ShardMapTrainStep;  // the library's own (src/shard_map_train_step.h)
class JitTrainStep;       // src/jit_train_step.h

// How the step's arguments and results are laid out.
struct StepLayout {
  // params and opt_state (and a layers model's batch_stats) carry a leading device axis, a
  // copy per device (pmap's in_axes=0); else they are one value: pmap's in_axes=None (S4's
  // program) or jit's global arrays, which the shardings place.
  bool stacked_state = true;
  // The loss (one per device, [N]) and the gradients ([N, ...]) carry the device axis; else
  // they are jit's global loss and gradients.
  bool per_device_results = true;
  // x and y are the global batch, [N * B, ...] (jit); else [N, B, ...], device d's batch at d.
  bool global_batch = false;
};

// The parameters and optimizer state each device holds between steps.
struct DeviceStateBytes {
  int64_t params = 0;     // bytes
  int64_t opt_state = 0;  // bytes
  std::string layout;     // how they are spread over the devices, in words
};

class MappedTrainStep {
 public:
  MappedTrainStep(pe::Pmapped step, StepLayout layout);
  explicit MappedTrainStep(ShardMapTrainStep step);
  explicit MappedTrainStep(JitTrainStep step);
  ~MappedTrainStep();
  pe::Tree operator()(const std::vector<pe::Tree>& args) const;
  const StepLayout& layout() const;
  pe::CacheStats cache_stats() const;
  pe::MappedExecutionStats last_execution() const;
  // How last_execution()'s peak was measured, for run.json's memory.method.
  std::string memory_method() const;
  // The per-device program traced for these arguments (under shard_map its values carry the
  // axes they vary along, with the pvary and psum_invariant JAX inserts; under jit, the
  // global program).
  std::string program_text(const std::vector<pe::Tree>& args) const;
  // Under jit with shardings: every value's sharding and the per-device program after SPMD
  // partitioning, with its collectives and memory plan. InputError for pmap and shard_map,
  // whose programs are written per device already.
  std::string partitioned_program_text(const std::vector<pe::Tree>& args) const;
  // What each device holds of `params` and `opt_state`, given as one device's values (or the
  // global ones): whole leaves under pmap and shard_map, each leaf's block under jit's
  // shardings (known once the step has run).
  DeviceStateBytes device_state_bytes(const pe::Tree& params, const pe::Tree& opt_state) const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// The step of `step.program` on `devices` in the case's parallel.style; throws as
// make_pmap_train_step does, and InputError for a program or a process count a jit style
// cannot train.
MappedTrainStep make_mapped_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                       const EngineStepOptions& step = {});

// The optimizer the step applies (its state is the step's opt_state): the case's, without the
// clipping by global norm, which the step does itself where the case places it
// (train.clip_placement).
pe::optim::GradientTransformation step_optimizer(const CaseSpec& spec);

}  // namespace parity::engine_trainer
