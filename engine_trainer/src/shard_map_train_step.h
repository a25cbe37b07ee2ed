// The train step under jax.shard_map(check_vma=True) (EngineProgram::runs_under_shard_map),
// as a JAX user writes it on a one-axis mesh:
//
//   mesh = Mesh(jax.devices(), ('data',))
//   step = jax.shard_map(train_step, mesh=mesh,
//                        in_specs=(P(), P(), P('data'), P('data')),
//                        out_specs=(P(), P(), P('data'), P()))
//
// params and optimizer state replicated, x and y split on the batch axis. check_vma types every
// value with the axes it varies along, so JAX pvarys the replicated params where they meet the
// device's batch and, under grad, transposes that pvary to psum_invariant: each parameter's
// gradient is the sum of the devices' gradients (pmap_engine/shard_map.h).
#pragma once

#include <cstdint>
#include <vector>

#include "pmap_engine/shard_map.h"
#include "step_plan.h"
#include "step_signature.h"

namespace parity::engine_trainer {

// The shard_map'd step and how it is called in the pmap layout the trainer keeps
// (make_pmap_train_step): params and opt_state go in as device 0's copy, x and y with the device
// and batch axes merged into the global batch; params, opt_state and grads come out as one
// global value (out_specs P(), which check_vma proved invariant) and are stacked back on the
// device axis, the loss one per device. MappedTrainStep runs it.
class ShardMapTrainStep {
 public:
  ShardMapTrainStep(pe::ShardMapped step, StepSignature signature, int64_t num_devices);

  const pe::ShardMapped& step() const { return step_; }
  // The pmap layout's arguments as the shard_map'd step takes them.
  std::vector<pe::Tree> global_arguments(const std::vector<pe::Tree>& args) const;
  // Its results in the pmap layout.
  pe::Tree stacked_results(const pe::Tree& out) const;

 private:
  pe::ShardMapped step_;
  StepSignature signature_;
  int64_t num_devices_;
};

// The step on Mesh(devices, ('data',)). check_replicas (pmap's run-time check) has nothing to
// do: check_vma proves params and opt_state invariant when the step is traced.
ShardMapTrainStep make_shard_map_train_step(const EngineStepPlan& plan,
                                            const pe::DeviceSet& devices);

}  // namespace parity::engine_trainer
