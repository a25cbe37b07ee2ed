// The parts the engine programs (parity/engine_trainer/scenario_programs.h) are made of: the
// program's gradient reduction inside the mapped step, the case's loss, parameters and first
// samples for the programs that run one step, and the error programs' and probes' runners.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/engine_trainer/scenario_programs.h"
#include "pmap_engine/pmap.h"
#include "pmap_engine/transforms.h"

namespace parity::engine_trainer {

namespace pe = pmap_engine;

// The part of a program that runs inside the pmap: the per-device (loss, gradients) of one
// batch, and the program's reduction of gradients over devices (applied once per optimizer
// step, after any accumulation), with the axis name the pmap binds.
struct MappedGradients {
  std::string axis_name;
  pe::TreeFunction local;                           // (params, x, y) -> (loss, grads)
  std::function<pe::Tree(const pe::Tree&)> reduce;  // grads -> the grads the optimizer applies
  // (params, x, y) -> (loss, reduced grads): local, then reduce.
  pe::TreeFunction loss_and_reduced_grads() const;
};

// `loss_fn`: (params, x, y) -> the local mean loss; the program's gradient reduction around it.
// With `has_aux` (a program that trains layers models), loss_fn is (params, x, y, batch_stats)
// -> (loss, new batch_stats) and `local` returns ((loss, new batch_stats), grads).
MappedGradients mapped_gradients(const EngineProgram& program, const pe::TreeFunction& loss_fn,
                                 bool has_aux = false);

// pmap's options for a (params, x, y) step as 000 §5.3 writes it: in_axes=(None, 0, 0), params
// broadcast and data mapped, over the case's parallel.replicas devices, bound to `axis_name`.
pe::PmapOptions broadcast_params_options(const CaseSpec& spec,
                                         const std::string& axis_name = "data");
// The engine error `run` raises, or nullopt when it runs through.
std::optional<std::string> engine_error_of(const std::function<void()>& run);

// One step of the program's mapped gradients under pmap(in_axes=(None, 0, 0)) on the case's
// devices, fed the first `mapped` x `per_device` samples as a [mapped, per_device, ...] batch:
// the engine's error message, or nullopt when the step ran.
std::optional<std::string> run_mapped_step(const CaseSpec& spec, const EngineProgram& program,
                                           int64_t mapped, int64_t per_device);
// The JAX part of an engine error: the text before the engine's own hint, which follows JAX's
// text as " (pmap_engine: ...)"; the whole text when there is none.
std::string jax_part(const std::string& engine_error);
// The jit-* error programs (sharded_jit_programs.cpp).
std::optional<std::string> run_sharded_jit_program(const CaseSpec& spec,
                                                   const EngineProgram& program);

// The case's model loss, (params, x, y) -> the local mean loss in f32, and its initial
// parameters (the case's seed), for the programs that run one step rather than train.
pe::TreeFunction case_loss(const CaseSpec& spec);
pe::Tree case_params(const CaseSpec& spec);

// The case's first `count` training samples: x [count, D] f32 and integer labels y [count].
// Needs a classification dataset with that many samples (InputError otherwise).
struct GlobalBatch {
  pe::Array x, y;
};
GlobalBatch global_samples(const CaseSpec& spec, const std::string& program, int64_t count);
// The same as a mapped batch: x [mapped, per_device, D], y [mapped, per_device].
struct MappedBatch {
  pe::Array x, y;
};
MappedBatch first_samples(const CaseSpec& spec, const std::string& program, int64_t mapped,
                          int64_t per_device);

// The probes with files of their own, called by run_probe_program.
ProbeResult probe_communication_volume(const CaseSpec& spec);
ProbeResult probe_memory_7b(const CaseSpec& spec);

}  // namespace parity::engine_trainer
