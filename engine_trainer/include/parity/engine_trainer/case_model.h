// The case's model as the engine trainer writes it, for the commands and benchmarks that run
// its step outside a training run (parity program): its parameters as the engine's tree, its
// optimizer, its jitted one-device train step (the models themselves: src/models/).
#pragma once

#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "pmap_engine/optim.h"
#include "pmap_engine/transforms.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// How a model's canonical names join the path of a tensor in its tree: "dense0.kernel" for a
// widths model, Flax's "Residual_0/Conv_0/kernel" for a layers model (docs/model-layers.md).
std::string name_separator(const ModelSpec& model);

// Canonical tensors as the nested dict of their names split at every `separator`
// ("dense0.kernel" as {"dense0": {"bias", "kernel"}}), whose leaf paths are the names again.
pe::Tree params_from_tensors(const NamedTensors& tensors, const std::string& separator = ".");

// The "batch_stats" collection as flax.linen.BatchNorm initialises it (normalization.py,
// BatchNorm.__call__: ra_mean zeros, ra_var ones), in `dtype`; an empty dict without BatchNorm.
pe::Tree initial_batch_stats(const ModelSpec& model, pe::DType dtype);

// The case's optimizer with optax semantics (the torch.optim equivalents ddp_ref uses), with
// optax.clip_by_global_norm at the front of the chain when the case clips, unless `clips` is
// false (a train step that clips the gradients itself, engine_trainer/src/train_step.cpp).
pe::optim::GradientTransformation make_optimizer(const TrainSpec& train, bool clips = true);

// A widths model's train_step(params, opt_state, x, y) -> (params, opt_state, loss, grads) as
// seed 002 writes it (src/models/model.h), jitted with params and opt_state donated. The
// grads are returned so that runs can record them.
pe::Jitted make_train_step(const CaseSpec& spec);

}  // namespace parity::engine_trainer
