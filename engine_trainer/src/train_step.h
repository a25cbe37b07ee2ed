// The train step every device runs (train_step.cpp), built from the case's step plan
// (step_plan.h), shared by the transformations that map it over the devices: pmap
// (make_pmap_train_step) and shard_map (shard_map_train_step.h); and the same step over the
// global batch, which jit partitions (jit_train_step.h). Its arguments and results are
// step_signature.h's.
#pragma once

#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "step_plan.h"

namespace parity::engine_trainer {

// One device's train_step(params, opt_state, x, y[, batch_stats][, key]) -> (params,
// opt_state, loss, grads[, batch_stats][, draws]) as make_pmap_train_step describes it,
// unmapped; its collectives use plan.gradients.axis_name.
pe::TreeFunction device_step_function(const EngineStepPlan& plan);

// train_step(params, opt_state, x, y[, batch_stats]) -> (params, opt_state, loss, grads[,
// batch_stats]) on the global batch, as a JAX user writes it for jit: the loss the mean over
// the global batch, value_and_grad, no collective; the rest (micro-batches, clipping, the optax
// update) as device_step_function's faithful pmean step. The plan's program must be "pmean"
// (make_jit_train_step checks it); a model with dropout is an InternalError (case validation
// refuses dropout under a jit style).
pe::TreeFunction global_step_function(const EngineStepPlan& plan);

// The step under pmap(axis_name=...) on `devices` (engine_trainer.h's make_pmap_train_step).
pe::Pmapped make_pmap_train_step(const EngineStepPlan& plan, const pe::DeviceSet& devices);

// The step spread over `devices` as plan.transform says (mapped_train_step.h).
MappedTrainStep make_mapped_train_step(const EngineStepPlan& plan, const pe::DeviceSet& devices);

}  // namespace parity::engine_trainer
