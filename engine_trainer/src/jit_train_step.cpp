#include "jit_train_step.h"

#include <fmt/format.h>

#include <mutex>
#include <optional>

#include "jit_shardings.h"
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
  State(pe::TreeFunction step, std::string style, pe::Mesh mesh, StepSignature signature,
        std::string separator)
      : step(std::move(step)),
        style(std::move(style)),
        mesh(std::move(mesh)),
        signature(signature),
        separator(std::move(separator)) {}

  pe::TreeFunction step;
  std::string style;
  pe::Mesh mesh;
  StepSignature signature;
  std::string separator;

  mutable std::mutex mutex;  // guards the jitted step and the shapes it was made for
  std::optional<pe::Jitted> jitted;
  std::vector<pe::Shape> shapes;

  TrainStepShardings shardings(const pe::Tree& params, const pe::Tree& opt_state) const {
    return train_step_shardings(style, mesh, params, opt_state, signature);
  }
};

JitTrainStep::JitTrainStep(pe::TreeFunction step, std::string style, pe::Mesh mesh,
                           StepSignature signature, std::string separator)
    : state_(std::make_shared<State>(std::move(step), std::move(style), std::move(mesh), signature,
                                     std::move(separator))) {}

pe::Jitted JitTrainStep::jitted_for(const std::vector<pe::Tree>& args) const {
  State& state = *state_;
  const StepArguments named = state.signature.arguments(args);
  std::vector<pe::Shape> shapes = state_shapes(named.params, named.opt_state);
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.jitted && state.shapes == shapes) return *state.jitted;
  const TrainStepShardings shardings = state.shardings(named.params, named.opt_state);
  pe::JitOptions options;
  options.donate_argnums = state.signature.state_argnums();
  options.in_shardings = shardings.in;
  options.out_shardings = shardings.out;
  state.jitted = pe::jit(state.step, options, "train_step");
  state.shapes = std::move(shapes);
  return *state.jitted;
}

std::optional<pe::Jitted> JitTrainStep::last_jitted() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->jitted;
}

std::string JitTrainStep::memory_method() const {
  return fmt::format(
      "pmap_engine planner: exact peak of live buffers per device of the {} program "
      "partitioned over {} devices",
      state_->style, state_->mesh.size());
}

DeviceStateBytes JitTrainStep::device_state_bytes(const pe::Tree& params,
                                                  const pe::Tree& opt_state) const {
  return sharded_state_bytes(state_->style, params, opt_state,
                             state_->shardings(params, opt_state), state_->separator);
}

JitTrainStep make_jit_train_step(const EngineStepPlan& plan, const pe::DeviceSet& devices) {
  const CaseSpec& spec = plan.spec;
  if (plan.program.name != "pmean") {
    throw InputError(fmt::format(
        "case {}: parallel.style = \"{}\" trains the faithful step (value_and_grad of the "
        "global mean loss, program pmean), but the engine program is '{}', a step written for "
        "pmap; use parallel.style = \"pmap\" for it",
        spec.name, spec.parallel.style, plan.program.name));
  }
  const pe::Mesh mesh(devices, {{"data", devices.size()}});
  return JitTrainStep(global_step_function(plan), spec.parallel.style, mesh, plan.signature,
                      plan.name_separator);
}

}  // namespace parity::engine_trainer
