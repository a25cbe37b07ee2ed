// A case and its engine program resolved once, before anything is traced, into what the step
// builders and the trainer read: the program and its gradient reduction, the model's kind (a
// layers model's BatchNorm statistics are the step's model state; it may have dropout), the
// step's dtype and signature, how the step is spread over the devices; and for a training run
// the case's JAX release, the step at which it resumes on half the devices (S10) and the
// processes that read the whole dataset (P8). Every check of the case against the program is
// made here (require_* below; require_training_program in
// parity/engine_trainer/scenario_programs.h) and throws InputError.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/common/producer.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/jax_release.h"
#include "pmap_engine/optim.h"
#include "programs/program_parts.h"
#include "step_signature.h"

namespace parity::engine_trainer {

// How the step is spread over the devices (make_mapped_train_step).
enum class StepTransform {
  kPmap,                 // pmap(axis_name="data"): a copy of the state on every device
  kPmapBroadcastParams,  // pmap(in_axes=(None, None, 0, 0)): params broadcast (S4)
  kShardMap,             // jax.shard_map(check_vma=True) (EngineProgram::runs_under_shard_map)
  kJit,                  // jax.jit with shardings (parallel.style jit-dp, jit-fsdp)
};

// What the step builders read. The step functions copy what they keep; `spec` must outlive the
// plan only.
struct EngineStepPlan {
  // InputError for a layers case the program cannot train.
  EngineStepPlan(const CaseSpec& spec, const EngineStepOptions& options);

  const CaseSpec& spec;
  const EngineProgram& program;
  EngineStepOptions options;
  StepTransform transform;
  pe::DType compute_dtype;  // train.dtype's, or f64 for the float64 oracle
  std::string name_separator;
  // Whether the step carries model state (a layers model) and dropout keys, and where each
  // argument and result stands (signature.has_model_state(), has_dropout()).
  StepSignature signature;
  // The optimizer the step applies (step_optimizer).
  pe::optim::GradientTransformation optimizer;
  // The case's loss_fn: (params, x, y) -> loss for a widths model; for a layers model
  // (params, x, y, batch_stats[, dropout_key]) -> (loss, (new batch_stats, dropout draws)),
  // differentiated with has_aux.
  pe::TreeFunction loss_fn;
  // The program's per-device (loss, gradients) around it and its reduction over devices.
  MappedGradients gradients;
};

// What a training run reads besides, built once by train() and alive while the run lives.
struct EngineRunPlan {
  // InputError when the program does not train, or does not fit the case's model, its process
  // count or its device count.
  EngineRunPlan(const CaseSpec& spec, const EngineStepOptions& options,
                const std::optional<ProcessPlace>& place);

  // The case's JAX release (jax.version), in effect for the engine while the plan lives.
  const pe::ScopedJaxRelease release;
  const EngineStepPlan step;
  // The step at which the run saves a checkpoint and resumes on half the devices (S10).
  std::optional<int64_t> resume_step;
  // How many processes each read the whole dataset (P8: parallel.processes); 1 otherwise.
  int64_t readers = 1;
  // A model with dropout: each site's rate by its path, the names the step's draws carry.
  std::map<std::string, double> dropout_rates;
};

// Throws InputError, naming the program and the ones that do, when the case's model is given as
// layers and `program` trains widths models only (EngineProgram::trains_layer_models).
void require_program_trains_model(const CaseSpec& spec, const EngineProgram& program);

}  // namespace parity::engine_trainer
