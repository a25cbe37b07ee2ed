#include "parity/engine_trainer/mapped_train_step.h"

#include <variant>

#include "parity/common/engine_programs.h"
#include "shard_map_train_step.h"

namespace parity::engine_trainer {

struct MappedTrainStep::State {
  std::variant<pe::Pmapped, ShardMapTrainStep> step;
};

MappedTrainStep::MappedTrainStep(pe::Pmapped step)
    : state_(std::make_shared<const State>(State{std::move(step)})) {}

MappedTrainStep::MappedTrainStep(ShardMapTrainStep step)
    : state_(std::make_shared<const State>(State{std::move(step)})) {}

MappedTrainStep::~MappedTrainStep() = default;

pe::Tree MappedTrainStep::operator()(const std::vector<pe::Tree>& args) const {
  return std::visit([&](const auto& step) { return step(args); }, state_->step);
}

pe::CacheStats MappedTrainStep::cache_stats() const {
  return std::visit([](const auto& step) { return step.cache_stats(); }, state_->step);
}

pe::MappedExecutionStats MappedTrainStep::last_execution() const {
  return std::visit([](const auto& step) { return step.last_execution(); }, state_->step);
}

std::string MappedTrainStep::program_text(const std::vector<pe::Tree>& args) const {
  return std::visit([&](const auto& step) { return step.program_text(args); }, state_->step);
}

MappedTrainStep make_mapped_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                       const EngineStepOptions& step) {
  if (find_engine_program(step.program).runs_under_shard_map) {
    return MappedTrainStep(make_shard_map_train_step(spec, devices, step));
  }
  return MappedTrainStep(make_pmap_train_step(spec, devices, step));
}

}  // namespace parity::engine_trainer
