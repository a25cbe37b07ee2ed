#include "parity/engine_trainer/mapped_train_step.h"

#include <optional>
#include <variant>

#include "jit_train_step.h"
#include "parity/common/error.h"
#include "shard_map_train_step.h"
#include "train_step.h"

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

// A jitted run's statistics as a mapped step reports them: each device runs the partitioned
// program, so the program's figures are per device.
pe::MappedExecutionStats per_device(const pe::ExecutionStats& stats) {
  pe::MappedExecutionStats mapped;
  mapped.peak_bytes_per_device = stats.peak_bytes;
  mapped.peak_footprint_bytes_per_device = stats.peak_footprint_bytes;
  mapped.num_ops = stats.num_ops;
  mapped.num_collectives = stats.num_collectives;
  mapped.donated_reuses = stats.donated_reuses;
  return mapped;
}

// std::visit over a lambda per alternative.
template <typename... Lambdas>
struct Overloaded : Lambdas... {
  using Lambdas::operator()...;
};
template <typename... Lambdas>
Overloaded(Lambdas...) -> Overloaded<Lambdas...>;

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
  return std::visit(
      Overloaded{[&](const pe::Pmapped& step) { return step(args); },
                 [&](const ShardMapTrainStep& step) {
                   return step.stacked_results(step.step()(step.global_arguments(args)));
                 },
                 [&](const JitTrainStep& step) { return step.jitted_for(args)(args); }},
      state_->step);
}

const StepLayout& MappedTrainStep::layout() const { return state_->layout; }

pe::CacheStats MappedTrainStep::cache_stats() const {
  return std::visit(Overloaded{[](const pe::Pmapped& step) { return step.cache_stats(); },
                               [](const ShardMapTrainStep& step) {
                                 return step.step().cache_stats();
                               },
                               [](const JitTrainStep& step) {
                                 const std::optional<pe::Jitted> jitted = step.last_jitted();
                                 return jitted ? jitted->cache_stats() : pe::CacheStats{};
                               }},
                    state_->step);
}

pe::MappedExecutionStats MappedTrainStep::last_execution() const {
  return std::visit(
      Overloaded{[](const pe::Pmapped& step) { return step.last_execution(); },
                 [](const ShardMapTrainStep& step) { return step.step().last_execution(); },
                 [](const JitTrainStep& step) {
                   const std::optional<pe::Jitted> jitted = step.last_jitted();
                   return jitted ? per_device(jitted->last_execution())
                                 : pe::MappedExecutionStats{};
                 }},
      state_->step);
}

std::string MappedTrainStep::memory_method() const {
  if (const auto* jitted = std::get_if<JitTrainStep>(&state_->step)) {
    return jitted->memory_method();
  }
  return kPlannerMethod;
}

std::string MappedTrainStep::program_text(const std::vector<pe::Tree>& args) const {
  return std::visit(
      Overloaded{[&](const pe::Pmapped& step) { return step.program_text(args); },
                 [&](const ShardMapTrainStep& step) {
                   return step.step().program_text(step.global_arguments(args));
                 },
                 [&](const JitTrainStep& step) { return step.jitted_for(args).program_text(args); }},
      state_->step);
}

std::string MappedTrainStep::partitioned_program_text(const std::vector<pe::Tree>& args) const {
  if (const auto* jitted = std::get_if<JitTrainStep>(&state_->step)) {
    return jitted->jitted_for(args).partitioned_program_text(args);
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

MappedTrainStep make_mapped_train_step(const EngineStepPlan& plan, const pe::DeviceSet& devices) {
  switch (plan.transform) {
    case StepTransform::kJit:
      return MappedTrainStep(make_jit_train_step(plan, devices));
    case StepTransform::kShardMap:
      return MappedTrainStep(make_shard_map_train_step(plan, devices));
    case StepTransform::kPmapBroadcastParams: {
      // S4's params broadcast with in_axes=None come back as the one value all devices hold.
      StepLayout layout;
      layout.stacked_state = false;
      return MappedTrainStep(make_pmap_train_step(plan, devices), layout);
    }
    case StepTransform::kPmap:
      return MappedTrainStep(make_pmap_train_step(plan, devices), StepLayout{});
  }
  throw InternalError("make_mapped_train_step: a step transform without a step");
}

MappedTrainStep make_mapped_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                       const EngineStepOptions& step) {
  return make_mapped_train_step(EngineStepPlan(spec, step), devices);
}

}  // namespace parity::engine_trainer
