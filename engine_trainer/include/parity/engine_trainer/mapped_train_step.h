// The train step as the trainer runs it, under the transformation its engine program maps it
// with: pmap (make_pmap_train_step), or jax.shard_map for a program that
// runs_under_shard_map. Either way it takes and returns make_pmap_train_step's layout, every
// argument and result with a leading device axis, so the trainer treats both alike.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/optim.h"

namespace parity::engine_trainer {

class ShardMapTrainStep;  // the library's own (src/shard_map_train_step.h)

class MappedTrainStep {
 public:
  explicit MappedTrainStep(pe::Pmapped step);
  explicit MappedTrainStep(ShardMapTrainStep step);
  ~MappedTrainStep();
  pe::Tree operator()(const std::vector<pe::Tree>& args) const;
  pe::CacheStats cache_stats() const;
  pe::MappedExecutionStats last_execution() const;
  // The per-device program traced for these arguments (under shard_map its values carry the
  // axes they vary along, with the pvary and psum_invariant JAX inserts).
  std::string program_text(const std::vector<pe::Tree>& args) const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// The step of `step.program` on `devices`; throws as make_pmap_train_step does.
MappedTrainStep make_mapped_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                       const EngineStepOptions& step = {});

// The optimizer the step applies (its state is the step's opt_state): the case's, without the
// clipping by global norm, which the step does itself where the case places it
// (train.clip_placement).
pe::optim::GradientTransformation step_optimizer(const CaseSpec& spec);

}  // namespace parity::engine_trainer
