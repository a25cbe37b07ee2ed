#include "step_inputs.h"

#include "pmap_engine/ops.h"
#include "train_step.h"

namespace parity::engine_trainer {
namespace {

// The step's inputs: device d gets what ddp_ref's rank d reads, stacked on the device axis.
struct StepBatch {
  pe::Array inputs;   // [N, B, D]
  pe::Array targets;  // [N, B] i32 labels or [N, B, T] f32
  std::vector<int64_t> global_sample_ids;
  double samples_per_device = 0;

  // Inputs, and regression targets, in `dtype`; integer labels stay as they are.
  void cast_floats(pe::DType dtype) {
    inputs = pe::astype(inputs, dtype);
    if (pe::is_floating(targets.dtype())) targets = pe::astype(targets, dtype);
  }
};

// The arrays of this process's devices, ranks [first_rank, first_rank + num_devices); the ids
// of every rank (the global batch).
StepBatch make_batch(const Dataset& data, const StepBatches& batches, int64_t first_rank,
                     int64_t num_devices) {
  const int64_t batch = static_cast<int64_t>(batches.rank_sample_ids.front().size());
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<float> targets;
  StepBatch out;
  for (const auto& ids : batches.rank_sample_ids) {
    out.global_sample_ids.insert(out.global_sample_ids.end(), ids.begin(), ids.end());
  }
  for (int64_t rank = first_rank; rank < first_rank + num_devices; ++rank) {
    for (int64_t id : batches.rank_sample_ids[static_cast<size_t>(rank)]) {
      const auto row = data.features.begin() + id * data.feature_dim;
      x.insert(x.end(), row, row + data.feature_dim);
      if (!data.labels.empty()) {
        labels.push_back(static_cast<int32_t>(data.labels[static_cast<size_t>(id)]));
      } else {
        const auto target = data.targets.begin() + id * data.target_dim;
        targets.insert(targets.end(), target, target + data.target_dim);
      }
    }
  }
  out.inputs = pe::Array::from_floats({num_devices, batch, data.feature_dim}, x);
  out.targets = data.labels.empty()
                    ? pe::Array::from_floats({num_devices, batch, data.target_dim}, targets)
                    : pe::Array::from_ints({num_devices, batch}, labels);
  out.samples_per_device = static_cast<double>(batch);
  return out;
}

}  // namespace

std::vector<double> StepInputs::device_losses(const pe::Tree& output) const {
  if (micro_batch_sizes.size() == 1) return output.leaf().to_doubles();
  std::vector<double> weighted;
  for (size_t m = 0; m < micro_batch_sizes.size(); ++m) {
    const std::vector<double> losses = output[m].leaf().to_doubles();
    weighted.resize(losses.size(), 0.0);
    for (size_t d = 0; d < losses.size(); ++d) {
      weighted[d] += losses[d] * micro_batch_sizes[m] / samples_per_device;
    }
  }
  return weighted;
}

const pe::Tree& StepInputs::first_micro_batch_inputs() const {
  return micro_batch_sizes.size() == 1 ? inputs : inputs[0];
}

Placement::Placement(const EngineStepPlan& step_plan, int64_t dataset_size, int64_t num_devices,
                     int64_t first_device, int64_t local_devices, int64_t readers)
    : readers(readers),
      first_device(first_device),
      local_devices(local_devices),
      plan(case_sampler_options(step_plan.spec, dataset_size, num_devices / readers),
           step_plan.spec.data.per_replica_batch * step_plan.spec.parallel.replicas / num_devices),
      step(make_mapped_train_step(step_plan, pe::DeviceSet(static_cast<int>(local_devices)))) {}

StepBatches Placement::batches(int64_t index) const {
  StepBatches batches = plan.step(index);
  const std::vector<std::vector<int64_t>> per_process = batches.rank_sample_ids;
  for (int64_t p = 1; p < readers; ++p) {
    batches.rank_sample_ids.insert(batches.rank_sample_ids.end(), per_process.begin(),
                                   per_process.end());
  }
  return batches;
}

StepInputs step_inputs(const Dataset& data, const Placement& placement, int64_t step,
                       int64_t micro_batches, bool float64) {
  StepInputs out;
  std::vector<pe::Tree> inputs, targets;
  for (int64_t m = 0; m < micro_batches; ++m) {
    StepBatch batch = make_batch(data, placement.batches(step * micro_batches + m),
                                 placement.first_device, placement.local_devices);
    if (float64) batch.cast_floats(pe::DType::f64);
    inputs.emplace_back(batch.inputs);
    targets.emplace_back(batch.targets);
    out.global_sample_ids.insert(out.global_sample_ids.end(), batch.global_sample_ids.begin(),
                                 batch.global_sample_ids.end());
    out.micro_batch_sizes.push_back(batch.samples_per_device);
    out.samples_per_device += batch.samples_per_device;
  }
  out.inputs = micro_batches == 1 ? inputs.front() : pe::Tree::tuple(inputs);
  out.targets = micro_batches == 1 ? targets.front() : pe::Tree::tuple(targets);
  return out;
}

}  // namespace parity::engine_trainer
