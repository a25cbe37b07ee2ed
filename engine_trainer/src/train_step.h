// The train step every device runs (train_step.cpp), shared by the transformations that map it
// over the devices: pmap (make_pmap_train_step) and shard_map (shard_map_train_step.h); and
// the same step over the global batch, which jit partitions (jit_train_step.h).
#pragma once

#include <string>

#include "parity/common/case_spec.h"
#include "parity/engine_trainer/engine_trainer.h"

namespace parity::engine_trainer {

// One device's train_step(params, opt_state, x, y[, batch_stats][, key]) -> (params, opt_state,
// loss, grads[, batch_stats][, draws]) as make_pmap_train_step describes it, unmapped, and the
// axis name its collectives use. Throws InputError for a layers case the program or the layer
// model cannot train.
struct DeviceStepFunction {
  pe::TreeFunction function;
  std::string axis_name;
};
DeviceStepFunction device_step_function(const CaseSpec& spec,
                                        const EngineStepOptions& step_options);

// train_step(params, opt_state, x, y[, batch_stats]) -> (params, opt_state, loss, grads[,
// batch_stats]) on the global batch, as a JAX user writes it for jit: the loss the mean over
// the global batch, value_and_grad, no collective; the rest (micro-batches, clipping, the optax
// update) as device_step_function's faithful pmean step. Step options' program is not read
// (make_jit_train_step checks it); a model with dropout is an InternalError (case validation
// refuses dropout under a jit style).
pe::TreeFunction global_step_function(const CaseSpec& spec,
                                      const EngineStepOptions& step_options);

}  // namespace parity::engine_trainer
