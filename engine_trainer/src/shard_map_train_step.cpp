#include "shard_map_train_step.h"

#include "device_trees.h"
#include "pmap_engine/ops.h"
#include "train_step.h"

namespace parity::engine_trainer {
namespace {

// out_specs P('data') concatenates the devices' blocks on axis 0, so each device returns its
// scalar loss as loss[None], as a shard_map user writes it: the global loss is one per device,
// [N], pmap's layout.
pe::TreeFunction with_loss_as_block(pe::TreeFunction step, const StepSignature& signature) {
  return [step = std::move(step), signature](const std::vector<pe::Tree>& args) {
    StepResults out = signature.results(step(args));
    out.loss = pe::tree_map([](const pe::Array& loss) { return pe::reshape(loss, {1}); }, out.loss);
    return signature.result_tuple(out);
  };
}

}  // namespace

ShardMapTrainStep::ShardMapTrainStep(pe::ShardMapped step, StepSignature signature,
                                     int64_t num_devices)
    : step_(std::move(step)), signature_(signature), num_devices_(num_devices) {}

std::vector<pe::Tree> ShardMapTrainStep::global_arguments(const std::vector<pe::Tree>& args) const {
  StepArguments named = signature_.arguments(args);
  named.params = device_slice(named.params, 0);
  named.opt_state = device_slice(named.opt_state, 0);
  named.x = merge_device_axis(named.x);
  named.y = merge_device_axis(named.y);
  return signature_.arguments(named);
}

pe::Tree ShardMapTrainStep::stacked_results(const pe::Tree& out) const {
  StepResults named = signature_.results(out);
  named.params = replicate(named.params, num_devices_);
  named.opt_state = replicate(named.opt_state, num_devices_);
  named.grads = replicate(named.grads, num_devices_);
  return signature_.result_tuple(named);
}

ShardMapTrainStep make_shard_map_train_step(const EngineStepPlan& plan,
                                            const pe::DeviceSet& devices) {
  const std::string& axis_name = plan.gradients.axis_name;
  const pe::PartitionSpec replicated;
  const pe::PartitionSpec split({{axis_name}});
  const StepSignature& signature = plan.signature;
  pe::ShardMapOptions options;
  // A shard_map program trains widths models: no model state, no dropout.
  options.in_specs = signature.arguments<pe::PartitionSpec>(
      {replicated, replicated, split, split, replicated, replicated});
  options.out_specs = signature.results<pe::PartitionSpec>(
      {replicated, replicated, split, replicated, replicated, replicated});
  options.check_vma = true;
  options.donate_argnums = signature.state_argnums();
  const pe::Mesh mesh(devices, {{axis_name, devices.size()}});
  return ShardMapTrainStep(
      pe::shard_map(with_loss_as_block(device_step_function(plan), signature), mesh, options),
      signature, devices.size());
}

}  // namespace parity::engine_trainer
