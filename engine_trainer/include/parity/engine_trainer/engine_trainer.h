// engine_trainer: the JAX side's producer. Trains a case with pmap_engine, the step written as a
// JAX user writes it (value_and_grad, the program's gradient reduction, an optax update) under
// pmap(axis_name="data") (or jax.shard_map for a program that runs under it, or jax.jit with
// shardings over the global batch for parallel.style jit-dp and jit-fsdp: mapped_train_step.h)
// on parallel.replicas devices, each fed exactly the samples ddp_ref's rank of the same index
// reads, and writes the same run directory as ddp_ref (producer "pmap_engine"). The
// counterpart of ddp_ref (parity/common/producer.h).
#pragma once

#include <optional>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/producer.h"
#include "pmap_engine/pmap.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// How a step differs from the case's plain data-parallel step.
struct EngineStepOptions {
  // The engine program (parity/common/engine_programs.h): "pmean" is the data-parallel
  // average DDP computes; the others are the documents' variants and mistakes (psum is P2...).
  std::string program = "pmean";
  // Every step verifies that params and opt_state are bit-identical on all devices (pmap's
  // replication check) and names the first divergent leaf and device. Under shard_map and jit
  // there is nothing to check: their params are one value.
  bool check_replicas = false;
  // The float64 oracle: master weights, optimizer state, inputs and every op in f64 (the case's
  // train.dtype is ignored), so its trajectory is closer to exact training than any f32 run's.
  bool float64 = false;
};

struct EngineOptions : ProducerOptions {
  EngineStepOptions step;
  // Evaluate the final parameters on the test split (run.json's test_loss, test_accuracy).
  // `parity run` turns it off for its float64 oracle, whose losses and tensors are all the
  // comparison reads: an f64 pass over the 10,000 test images would cost more than its steps.
  bool evaluate = true;
};

// Trains the case on parallel.replicas devices: all of them in this process (`place` nullopt),
// or this process's share of a run over place->count processes, which join through
// pmap_engine/distributed.h as the processes of a JAX job call jax.distributed.initialize.
// Process 0 writes the run directory and returns the summary; the others return an empty one.
// Throws RunError when the run fails (the run directory is then marked incomplete, naming a
// lost process), InputError when the case or the place does not fit the program.
ProducerSummary train(const CaseSpec& spec, const EngineOptions& options,
                      const std::optional<ProcessPlace>& place = std::nullopt);

// train_step(params, opt_state, x, y) under pmap(axis_name="data") on `devices`: every
// argument carries a leading device axis; returns (params, opt_state, per-device loss, reduced
// grads), donating params and opt_state. Params and opt_state must be f64 with step.float64.
// A layers model's step also takes and returns its BatchNorm statistics, each device's own:
// train_step(params, opt_state, x, y, batch_stats) -> (..., grads, batch_stats). Throws
// InputError for a layers case the program or the layer model cannot train.
pe::Pmapped make_pmap_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const EngineStepOptions& step = {});

// N copies of every leaf, stacked on a new leading device axis (jax.device_put_replicated).
pe::Tree replicate(const pe::Tree& tree, int64_t num_devices);

}  // namespace parity::engine_trainer
