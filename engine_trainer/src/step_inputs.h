// What each device reads: the sampler plan ddp_ref's ranks use, turned into the step's stacked
// arrays (device d reads what rank d reads).
#pragma once

#include <cstdint>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/distributed_sampler.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "step_plan.h"

namespace parity::engine_trainer {

// One optimizer step's inputs: its batch, or with train.grad_accum_steps = k its k
// micro-batches as tuples (batch s*k + m is micro-batch m of step s, as ddp_ref reads them).
struct StepInputs {
  pe::Tree inputs, targets;
  std::vector<int64_t> global_sample_ids;  // micro-batch-major, then device-major
  std::vector<double> micro_batch_sizes;   // samples per device in each micro-batch
  double samples_per_device = 0;           // over all micro-batches

  // Each device's loss over the step's samples, from the step's loss output: one value per
  // device, or a tuple with one per micro-batch, weighed by their sizes as ddp_ref weighs them
  // (the last micro-batch of an epoch may be shorter).
  std::vector<double> device_losses(const pe::Tree& output) const;
  // The inputs of the first micro-batch (the whole batch without accumulation).
  const pe::Tree& first_micro_batch_inputs() const;
};

// Where a run trains: its devices, the sampler plan that feeds them (ddp_ref's, for that many
// ranks) and the step compiled for them (pmapped, or shard_map'd for a program that runs under
// shard_map). The global batch stays the case's: fewer
// devices read more samples each.
//
// With `readers` > 1 every one of that many processes feeds its own devices from a plan it made
// alone, P8's mistake (002 §3.2): each shards the whole dataset over its local devices only,
// without jax.process_index(), so all feed the same samples. A run in one process computes what
// the multi-process run does (the same global pmap over the same batches).
//
// `num_devices` counts every process's devices; this process runs `local_devices` of them,
// from `first_device` on (all of them in a single-process run).
struct Placement {
  int64_t readers;  // processes reading the whole dataset (P8); 1: one plan for all devices
  int64_t first_device;
  int64_t local_devices;
  DistributedBatchPlan plan;
  MappedTrainStep step;

  Placement(const EngineStepPlan& step_plan, int64_t dataset_size, int64_t num_devices,
            int64_t first_device, int64_t local_devices, int64_t readers = 1);

  // Batch `index` for every device of every process, process-major.
  StepBatches batches(int64_t index) const;
};

// Step `step`'s inputs for this process's devices, in f64 for the float64 oracle.
StepInputs step_inputs(const Dataset& data, const Placement& placement, int64_t step,
                       int64_t micro_batches, bool float64);

}  // namespace parity::engine_trainer
