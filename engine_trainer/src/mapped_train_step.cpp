#include "parity/engine_trainer/mapped_train_step.h"

#include <variant>

#include "jit_train_step.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "shard_map_train_step.h"

namespace parity::engine_trainer {
namespace {

// pmap's devices and shard_map's P() each hold every leaf whole.
DeviceStateBytes whole_state_bytes(const pe::Tree& params, const pe::Tree& opt_state,
                                   const std::string& layout) {
  const auto bytes = [](const pe::Tree& tree) {
    size_t total = 0;
    for (const pe::Array& leaf : tree.leaves()) {
      total += leaf.num_elements() * pe::dtype_num_bytes(leaf.dtype());
    }
    return static_cast<int64_t>(total);
  };
  return {bytes(params), bytes(opt_state), layout};
}

constexpr const char* kPlannerMethod = "pmap_engine planner: exact peak of live buffers per device";

}  // namespace

struct MappedTrainStep::State {
  std::variant<pe::Pmapped, ShardMapTrainStep, JitTrainStep> step;
  StepLayout layout;
};

MappedTrainStep::MappedTrainStep(pe::Pmapped step, StepLayout layout)
    : state_(std::make_shared<const State>(State{std::move(step), layout})) {}

MappedTrainStep::MappedTrainStep(ShardMapTrainStep step)
    : state_(std::make_shared<const State>(State{std::move(step), StepLayout{}})) {}

MappedTrainStep::MappedTrainStep(JitTrainStep step)
    : state_(std::make_shared<const State>(
          State{std::move(step), StepLayout{/*stacked_state=*/false, /*per_device_results=*/false,
                                            /*global_batch=*/true}})) {}

MappedTrainStep::~MappedTrainStep() = default;

pe::Tree MappedTrainStep::operator()(const std::vector<pe::Tree>& args) const {
  return std::visit([&](const auto& step) { return step(args); }, state_->step);
}

const StepLayout& MappedTrainStep::layout() const { return state_->layout; }

pe::CacheStats MappedTrainStep::cache_stats() const {
  return std::visit([](const auto& step) { return step.cache_stats(); }, state_->step);
}

pe::MappedExecutionStats MappedTrainStep::last_execution() const {
  return std::visit([](const auto& step) { return step.last_execution(); }, state_->step);
}

std::string MappedTrainStep::memory_method() const {
  if (const auto* jitted = std::get_if<JitTrainStep>(&state_->step)) {
    return jitted->memory_method();
  }
  return kPlannerMethod;
}

std::string MappedTrainStep::program_text(const std::vector<pe::Tree>& args) const {
  return std::visit([&](const auto& step) { return step.program_text(args); }, state_->step);
}

std::string MappedTrainStep::partitioned_program_text(const std::vector<pe::Tree>& args) const {
  if (const auto* jitted = std::get_if<JitTrainStep>(&state_->step)) {
    return jitted->partitioned_program_text(args);
  }
  throw InputError(
      "only a jit step is partitioned: this case runs under pmap or shard_map, whose program "
      "is written per device (parity program CASE prints it); set parallel.style to jit-dp or "
      "jit-fsdp");
}

DeviceStateBytes MappedTrainStep::device_state_bytes(const pe::Tree& params,
                                                     const pe::Tree& opt_state) const {
  if (const auto* jitted = std::get_if<JitTrainStep>(&state_->step)) {
    return jitted->device_state_bytes(params, opt_state);
  }
  const bool shard_mapped = std::holds_alternative<ShardMapTrainStep>(state_->step);
  return whole_state_bytes(params, opt_state,
                           shard_mapped ? "shard_map: a full copy on every device (P())"
                                        : "pmap: a full copy on every device");
}

MappedTrainStep make_mapped_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                       const EngineStepOptions& step) {
  if (spec.parallel.style != "pmap") {
    return MappedTrainStep(make_jit_train_step(spec, devices, step));
  }
  const EngineProgram& program = find_engine_program(step.program);
  if (program.runs_under_shard_map) {
    return MappedTrainStep(make_shard_map_train_step(spec, devices, step));
  }
  // S4's params broadcast with in_axes=None come back as the one value all devices hold.
  StepLayout layout;
  layout.stacked_state = !program.broadcasts_params;
  return MappedTrainStep(make_pmap_train_step(spec, devices, step), layout);
}

}  // namespace parity::engine_trainer
