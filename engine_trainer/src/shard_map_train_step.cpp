#include "shard_map_train_step.h"

#include "device_trees.h"
#include "pmap_engine/ops.h"
#include "train_step.h"

namespace parity::engine_trainer {
namespace {

// Positions in train_step's arguments and results (engine_trainer.h).
constexpr size_t kParams = 0, kOptState = 1, kX = 2, kY = 3;
constexpr size_t kLoss = 2, kGrads = 3;

// out_specs P('data') concatenates the devices' blocks on axis 0, so each device returns its
// scalar loss as loss[None], as a shard_map user writes it: the global loss is one per device,
// [N], pmap's layout.
pe::TreeFunction with_loss_as_block(pe::TreeFunction step) {
  return [step = std::move(step)](const std::vector<pe::Tree>& args) {
    std::vector<pe::Tree> out = step(args).children();
    out[kLoss] =
        pe::tree_map([](const pe::Array& loss) { return pe::reshape(loss, {1}); }, out[kLoss]);
    return pe::Tree::tuple(std::move(out));
  };
}

}  // namespace

ShardMapTrainStep::ShardMapTrainStep(pe::ShardMapped step, int64_t num_devices)
    : step_(std::move(step)), num_devices_(num_devices) {}

std::vector<pe::Tree> ShardMapTrainStep::global_arguments(const std::vector<pe::Tree>& args) const {
  return {device_slice(args[kParams], 0), device_slice(args[kOptState], 0),
          merge_device_axis(args[kX]), merge_device_axis(args[kY])};
}

pe::Tree ShardMapTrainStep::operator()(const std::vector<pe::Tree>& args) const {
  std::vector<pe::Tree> out = step_(global_arguments(args)).children();
  for (size_t replicated : {kParams, kOptState, kGrads}) {
    out[replicated] = replicate(out[replicated], num_devices_);
  }
  return pe::Tree::tuple(std::move(out));
}

std::string ShardMapTrainStep::program_text(const std::vector<pe::Tree>& args) const {
  return step_.program_text(global_arguments(args));
}

ShardMapTrainStep make_shard_map_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                            const EngineStepOptions& step_options) {
  const DeviceStepFunction step = device_step_function(spec, step_options);
  const pe::PartitionSpec replicated;
  const pe::PartitionSpec split({{step.axis_name}});
  pe::ShardMapOptions options;
  options.in_specs = {replicated, replicated, split, split};
  options.out_specs = {replicated, replicated, split, replicated};
  options.check_vma = true;
  options.donate_argnums = {kParams, kOptState};
  const pe::Mesh mesh(devices, {{step.axis_name, devices.size()}});
  return ShardMapTrainStep(pe::shard_map(with_loss_as_block(step.function), mesh, options),
                           devices.size());
}

}  // namespace parity::engine_trainer
