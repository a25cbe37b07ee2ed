#include "parity/common/step_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "parity/common/digest.h"
#include "parity/common/error.h"
#include "parity/common/layer_intermediates.h"
#include "parity/common/step_timing.h"

namespace parity {
namespace {

// "NaN", "inf", "-inf" or the value, as a person reads it (printf's "-nan" says nothing).
std::string describe_value(double value) {
  if (std::isnan(value)) return "NaN";
  return fmt::format("{}", value);
}

}  // namespace

StepRecorder::StepRecorder(const CaseSpec& spec, RunDirWriter* writer, std::string replica_unit)
    : spec_(spec), writer_(writer), replica_unit_(std::move(replica_unit)) {}

bool StepRecorder::records_tensors(int64_t step) const {
  const auto& steps = spec_.train.record_steps;
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

void StepRecorder::check_losses_finite(const StepRecord& record) const {
  std::vector<std::string> bad;
  // A run without per-replica losses (a jit over the global batch computes one loss) is
  // checked on its global loss.
  if (record.replica_losses.empty() && !std::isfinite(record.loss)) {
    bad.push_back(fmt::format("the global batch ({})", describe_value(record.loss)));
  }
  for (size_t r = 0; r < record.replica_losses.size(); ++r) {
    if (!std::isfinite(record.replica_losses[r])) {
      bad.push_back(
          fmt::format("{} {} ({})", replica_unit_, r, describe_value(record.replica_losses[r])));
    }
  }
  if (bad.empty()) return;
  const std::string why = fmt::format(
      "step {}: the loss is not finite on {}; the run stops here. Check the learning rate, "
      "the input data of that {}, and the loss's dtype (pitfall P10)",
      record.step, fmt::join(bad, ", "), replica_unit_);
  if (writer_ != nullptr) writer_->mark_incomplete(why);
  throw RunError(why);
}

void StepRecorder::record_step(const StepRecord& record) const {
  if (writer_ == nullptr) return;
  StepMetrics metrics;
  metrics.step = record.step;
  metrics.loss = record.loss;
  metrics.replica_losses = record.replica_losses;
  metrics.grad_norm = record.grad_norm;
  metrics.param_norm = record.param_norm;
  metrics.lr = spec_.train.lr;
  metrics.step_seconds = record.step_seconds;
  metrics.samples_digest = digest_sample_ids(record.global_sample_ids);
  metrics.samples_set_digest = digest_sample_set(record.global_sample_ids);
  metrics.duplicate_samples = count_duplicates(record.global_sample_ids);
  // Fewer replicas than the case's trained this step (a run resumed on fewer devices): the line
  // says so, since run.json's replicas no longer count its losses.
  const auto trained = static_cast<int64_t>(record.replica_losses.size());
  if (trained > 0 && trained < spec_.parallel.replicas) metrics.replicas = trained;
  writer_->append_rng_draws(record.rng_draws);
  writer_->append_step(metrics);
}

void StepRecorder::record_tensors(int64_t step, const NamedTensors& grads,
                                  const NamedTensors& params,
                                  const NamedTensors& batch_stats,
                                  const std::vector<uint64_t>& replica_param_digests) const {
  if (writer_ == nullptr) return;
  NamedTensors tensors;
  for (const auto& [name, tensor] : grads) tensors.emplace("grads/" + name, tensor);
  for (const auto& [name, tensor] : params) tensors.emplace("params/" + name, tensor);
  for (const auto& [name, tensor] : batch_stats) tensors.emplace("batch_stats/" + name, tensor);
  HostTensor digests =
      HostTensor::zeros(DType::I64, {static_cast<int64_t>(replica_param_digests.size())});
  std::memcpy(digests.bytes.data(), replica_param_digests.data(), digests.num_bytes());
  tensors.emplace("replicas/param_digests", std::move(digests));
  writer_->write_tensors(step, tensors);
}

bool StepRecorder::records_intermediates(int64_t step) const {
  const auto& steps = spec_.train.record_steps;
  return writer_ != nullptr && !steps.empty() && steps.front() == step &&
         parity::records_intermediates(spec_.model);
}

void StepRecorder::record_intermediates(int64_t step, const HostTensor& input,
                                        const NamedTensors& outputs) const {
  if (writer_ == nullptr) return;
  const int64_t batch = input.shape.front();
  NamedTensors tensors;
  tensors.emplace(kIntermediatesInput, input);
  for (const LayerIntermediate& expected : layer_intermediates(spec_.model)) {
    const auto found = outputs.find(expected.path);
    Shape shape = {batch};
    shape.insert(shape.end(), expected.shape.begin(), expected.shape.end());
    if (found == outputs.end() || found->second.shape != shape) {
      throw InternalError(fmt::format(
          "step {}: the layer output {} {} (expected {})", step, expected.path,
          found == outputs.end() ? "was not recorded" : shape_to_string(found->second.shape),
          shape_to_string(shape)));
    }
    tensors.emplace(kIntermediatesGroup + expected.path, found->second);
  }
  if (tensors.size() != outputs.size() + 1) {
    throw InternalError(fmt::format("step {}: {} layer outputs recorded, the case has {}", step,
                                    outputs.size(), tensors.size() - 1));
  }
  writer_->write_intermediates(step, tensors);
}

void StepRecorder::finish(const RunTotals& totals) const {
  if (writer_ == nullptr) return;
  RunInfo& info = writer_->info();
  info.timings = summarize_step_times(totals.setup_seconds, totals.step_seconds);
  info.memory = totals.memory;
  for (const auto& [name, value] : totals.results) info.results[name] = value;
  writer_->finish();
}

}  // namespace parity
