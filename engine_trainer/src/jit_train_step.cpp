#include "jit_train_step.h"

#include <fmt/format.h>

#include <mutex>
#include <optional>

#include "jit_shardings.h"
#include "models/mlp_program.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "train_step.h"

namespace parity::engine_trainer {
namespace {

// The leaf shapes the shardings were chosen from (params', then opt_state's).
std::vector<pe::Shape> state_shapes(const pe::Tree& params, const pe::Tree& opt_state) {
  std::vector<pe::Shape> shapes;
  for (const pe::Tree* tree : {&params, &opt_state}) {
    for (const pe::Array& leaf : tree->leaves()) shapes.push_back(leaf.shape());
  }
  return shapes;
}

}  // namespace

struct JitTrainStep::State {
  State(pe::TreeFunction step, std::string style, pe::Mesh mesh, bool clipped_grads,
        bool has_model_state, std::string separator)
      : step(std::move(step)),
        style(std::move(style)),
        mesh(std::move(mesh)),
        clipped_grads(clipped_grads),
        has_model_state(has_model_state),
        separator(std::move(separator)) {}

  pe::TreeFunction step;
  std::string style;
  pe::Mesh mesh;
  bool clipped_grads;
  bool has_model_state;
  std::string separator;

  mutable std::mutex mutex;  // guards the jitted step and the shapes it was made for
  std::optional<pe::Jitted> jitted;
  std::vector<pe::Shape> shapes;

  TrainStepShardings shardings(const pe::Tree& params, const pe::Tree& opt_state) const {
    return train_step_shardings(style, mesh, params, opt_state, clipped_grads, has_model_state);
  }
};

JitTrainStep::JitTrainStep(pe::TreeFunction step, std::string style, pe::Mesh mesh,
                           bool clipped_grads, bool has_model_state, std::string separator)
    : state_(std::make_shared<State>(std::move(step), std::move(style), std::move(mesh),
                                     clipped_grads, has_model_state, std::move(separator))) {}

pe::Jitted JitTrainStep::jitted_for(const std::vector<pe::Tree>& args) const {
  State& state = *state_;
  std::vector<pe::Shape> shapes = state_shapes(args[0], args[1]);
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.jitted && state.shapes == shapes) return *state.jitted;
  const TrainStepShardings shardings = state.shardings(args[0], args[1]);
  pe::JitOptions options;
  options.donate_argnums = {0, 1};
  options.in_shardings = shardings.in;
  options.out_shardings = shardings.out;
  state.jitted = pe::jit(state.step, options, "train_step");
  state.shapes = std::move(shapes);
  return *state.jitted;
}

pe::Tree JitTrainStep::operator()(const std::vector<pe::Tree>& args) const {
  return jitted_for(args)(args);
}

pe::CacheStats JitTrainStep::cache_stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->jitted ? state_->jitted->cache_stats() : pe::CacheStats{};
}

pe::MappedExecutionStats JitTrainStep::last_execution() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->jitted) return {};
  const pe::ExecutionStats stats = state_->jitted->last_execution();
  pe::MappedExecutionStats mapped;
  mapped.peak_bytes_per_device = stats.peak_bytes;
  mapped.peak_footprint_bytes_per_device = stats.peak_footprint_bytes;
  mapped.num_ops = stats.num_ops;
  mapped.num_collectives = stats.num_collectives;
  mapped.donated_reuses = stats.donated_reuses;
  return mapped;
}

std::string JitTrainStep::memory_method() const {
  return fmt::format(
      "pmap_engine planner: exact peak of live buffers per device of the {} program "
      "partitioned over {} devices",
      state_->style, state_->mesh.size());
}

std::string JitTrainStep::program_text(const std::vector<pe::Tree>& args) const {
  return jitted_for(args).program_text(args);
}

std::string JitTrainStep::partitioned_program_text(const std::vector<pe::Tree>& args) const {
  return jitted_for(args).partitioned_program_text(args);
}

DeviceStateBytes JitTrainStep::device_state_bytes(const pe::Tree& params,
                                                  const pe::Tree& opt_state) const {
  return sharded_state_bytes(state_->style, params, opt_state,
                             state_->shardings(params, opt_state), state_->separator);
}

JitTrainStep make_jit_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const EngineStepOptions& step_options) {
  const EngineProgram& program = find_engine_program(step_options.program);
  if (program.name != "pmean") {
    throw InputError(fmt::format(
        "case {}: parallel.style = \"{}\" trains the faithful step (value_and_grad of the "
        "global mean loss, program pmean), but the engine program is '{}', a step written for "
        "pmap; use parallel.style = \"pmap\" for it",
        spec.name, spec.parallel.style, program.name));
  }
  const pe::Mesh mesh(devices, {{"data", devices.size()}});
  return JitTrainStep(global_step_function(spec, step_options), spec.parallel.style, mesh,
                      spec.train.clip_grad_norm > 0, !spec.model.layers.empty(),
                      name_separator(spec.model));
}

}  // namespace parity::engine_trainer
