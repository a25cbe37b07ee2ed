#include "step_plan.h"

#include <fmt/format.h>

#include "models/layer_model.h"
#include "models/model.h"
#include "parity/common/dropout_streams.h"
#include "parity/common/error.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "parity/engine_trainer/scenario_programs.h"

namespace parity::engine_trainer {
namespace {

StepTransform step_transform(const CaseSpec& spec, const EngineProgram& program) {
  if (spec.parallel.style != "pmap") return StepTransform::kJit;
  if (program.runs_under_shard_map) return StepTransform::kShardMap;
  return program.broadcasts_params ? StepTransform::kPmapBroadcastParams : StepTransform::kPmap;
}

pe::TreeFunction case_loss_fn(const ModelSpec& model, pe::DType dtype, bool cast_loss) {
  if (!model.layers.empty()) return layer_model_loss(model);
  return mlp_loss_fn(model, dtype, cast_loss);
}

// The options of a training run's step, checked first: a program that does not train is refused
// before anything is asked of its model.
const EngineStepOptions& training_options(const CaseSpec& spec,
                                          const EngineStepOptions& options) {
  require_training_program(spec, find_engine_program(options.program));
  return options;
}

// The process count the run's parallel.style can train with.
void check_process_count(const CaseSpec& spec, const std::optional<ProcessPlace>& place) {
  if (spec.parallel.style != "pmap" && place && place->count > 1) {
    throw InputError(fmt::format(
        "case {}: parallel.style = \"{}\" trains in one process (the engine's sharded jit spans "
        "one process's devices), but {} processes were asked for; drop --nproc, or use "
        "parallel.style = \"pmap\"",
        spec.name, spec.parallel.style, place->count));
  }
}

std::optional<int64_t> resume_step(const EngineStepPlan& step) {
  const CaseSpec& spec = step.spec;
  if (!step.program.resumes_on_half_the_devices) return std::nullopt;
  if (spec.parallel.replicas < 2 || spec.parallel.replicas % 2 != 0 || spec.train.steps < 2) {
    throw InputError(fmt::format(
        "case {}: engine program {} restores on half the devices at the middle step; it needs "
        "an even parallel.replicas (found {}) and train.steps >= 2 (found {})",
        spec.name, step.program.name, spec.parallel.replicas, spec.train.steps));
  }
  return spec.train.steps / 2;
}

int64_t processes_reading_everything(const EngineStepPlan& step) {
  const CaseSpec& spec = step.spec;
  if (!step.program.every_process_reads_everything) return 1;
  if (spec.parallel.processes < 2) {
    throw InputError(fmt::format(
        "case {}: engine program {} needs parallel.processes >= 2 (each process reads the "
        "whole dataset); found {}",
        spec.name, step.program.name, spec.parallel.processes));
  }
  return spec.parallel.processes;
}

std::map<std::string, double> dropout_rates(const ModelSpec& model) {
  std::map<std::string, double> rates;
  for (const DropoutSite& site : dropout_sites(model)) rates.emplace(site.path, site.rate);
  return rates;
}

}  // namespace

pe::ScopedJaxRelease case_jax_release(const CaseSpec& spec) {
  return pe::ScopedJaxRelease(pe::parse_jax_release(spec.jax.version));
}

void require_training_program(const CaseSpec& spec, const EngineProgram& program) {
  if (program.kind == ProgramKind::kTrains) return;
  throw InputError(fmt::format(
      "case {}: engine program {} does not train (it reproduces an error or probes an engine "
      "behaviour of the documents); run it with parity cases run {}",
      spec.name, program.name, spec.scenario.id.empty() ? std::string("ID") : spec.scenario.id));
}

void require_program_trains_model(const CaseSpec& spec, const EngineProgram& program) {
  if (spec.model.layers.empty() || program.trains_layer_models) return;
  throw InputError(fmt::format(
      "case {}: engine program {} runs widths models only, and this case's model is given as "
      "layers (docs/model-layers.md); layers models train with engine program {}, or give the "
      "model as widths = [...]",
      spec.name, program.name, layer_model_program_names()));
}

pe::optim::GradientTransformation step_optimizer(const CaseSpec& spec) {
  return make_optimizer(spec.train, /*clips=*/false);
}

EngineStepPlan::EngineStepPlan(const CaseSpec& spec, const EngineStepOptions& options)
    : spec(spec),
      program(find_engine_program(options.program)),
      options(options),
      transform(step_transform(spec, program)),
      compute_dtype(options.float64 ? pe::DType::f64
                                    : engine_trainer::compute_dtype(spec.train.dtype)),
      name_separator(engine_trainer::name_separator(spec.model)),
      signature(/*has_model_state=*/!spec.model.layers.empty(),
                engine_trainer::has_dropout(spec.model), spec.train.clip_grad_norm > 0),
      optimizer(step_optimizer(spec)) {
  require_program_trains_model(spec, program);
  loss_fn = case_loss_fn(spec.model, compute_dtype, !program.keeps_loss_in_compute_dtype);
  gradients = mapped_gradients(program, loss_fn, signature.has_model_state());
}

EngineRunPlan::EngineRunPlan(const CaseSpec& spec, const EngineStepOptions& options,
                             const std::optional<ProcessPlace>& place)
    : release(case_jax_release(spec)), step(spec, training_options(spec, options)) {
  check_process_count(spec, place);
  resume_step = engine_trainer::resume_step(step);
  readers = processes_reading_everything(step);
  dropout_rates = engine_trainer::dropout_rates(spec.model);
}

}  // namespace parity::engine_trainer
