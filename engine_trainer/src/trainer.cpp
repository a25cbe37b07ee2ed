#include "trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "device_trees.h"
#include "models/layer_model.h"
#include "models/model.h"
#include "parity/common/digest.h"
#include "parity/common/init_params.h"
#include "parity/common/tensor_file.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random.h"
#include "pmap_engine/random_ops.h"
#include "pmap_engine/shard_map.h"
#include "programs/checkpoint.h"

namespace parity::engine_trainer {
namespace {

namespace pr = pmap_engine::random;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Pitfall P4 as 000 §4.4 describes it: every device initialises its own parameters, from
// fold_in(PRNGKey(seed), device), instead of one initialisation broadcast to all.
pe::Tree initialise_per_device(const CaseSpec& spec, int64_t num_devices, pe::DType dtype) {
  const pr::Key key = pr::prng_key(static_cast<int64_t>(spec.init.seed));
  std::vector<pe::Tree> per_device;
  for (int64_t d = 0; d < num_devices; ++d) {
    per_device.push_back(cast_tree(
        params_from_tensors(init_mlp_params_from_key(
            spec.model.widths, pr::fold_in(key, static_cast<uint32_t>(d)), spec.init.scale)),
        dtype));
  }
  return stack(per_device);
}

}  // namespace

EngineTrainer::EngineTrainer(const EngineRunPlan& plan, const EngineOptions& options,
                             const ProcessSession& process, Clock::time_point run_start)
    : plan_(plan),
      spec_(plan.step.spec),
      signature_(plan.step.signature),
      options_(options),
      process_(process),
      run_start_(run_start),
      num_devices_(spec_.parallel.replicas),
      train_(load_case_dataset(spec_, "train")),
      dropout_keys_(spec_.rng) {
  const CaseSpec& spec = spec_;
  const int64_t local_devices = num_devices_ / process.count();
  placement_.emplace(plan.step, train_.num_samples, num_devices_, process.index() * local_devices,
                     local_devices, plan.readers);
  pe::Tree initial =
      params_from_tensors(read_safetensors(options.init_file).tensors, plan.step.name_separator);
  if (options.step.float64) initial = cast_tree(initial, pe::DType::f64);
  const pe::Tree initial_state = plan.step.optimizer.init(initial);
  // The step's layout: a copy per device on a leading axis (jax.device_put_replicated), or one
  // value (pmap's in_axes=None; jit's global arrays, which its shardings place).
  const bool stacked = layout().stacked_state;
  if (signature_.has_model_state()) {
    const pe::Tree stats = initial_batch_stats(spec.model, initial.leaves().front().dtype());
    batch_stats_ = stacked ? replicate(stats, local_devices) : stats;
  }
  if (!stacked) {
    params_ = initial;
    opt_state_ = initial_state;
  } else {
    params_ = plan.step.program.initialises_per_device
                  ? initialise_per_device(spec, num_devices_, initial.leaves().front().dtype())
                  : replicate(initial, local_devices);
    opt_state_ = replicate(initial_state, local_devices);
  }
}

const StepLayout& EngineTrainer::layout() const { return placement_->step.layout(); }

pe::Tree EngineTrainer::device_params(int64_t d) const {
  return layout().stacked_state ? device_slice(params_, d) : params_;
}

pe::Tree EngineTrainer::device_opt_state(int64_t d) const {
  return layout().stacked_state ? device_slice(opt_state_, d) : opt_state_;
}

pe::Tree EngineTrainer::device_batch_stats(int64_t d) const {
  return layout().stacked_state ? device_slice(batch_stats_, d) : batch_stats_;
}

StepArguments EngineTrainer::step_arguments(const StepInputs& batch, int64_t step) {
  // A jit takes the global batch: device d's samples are its block d.
  const bool global = layout().global_batch;
  return {params_,
          opt_state_,
          global ? merge_device_axis(batch.inputs) : batch.inputs,
          global ? merge_device_axis(batch.targets) : batch.targets,
          batch_stats_,
          signature_.has_dropout() ? pe::Tree(next_dropout_key(step)) : pe::Tree()};
}

// The step's dropout key (DropoutKeys::next_step_key); with rng.per_device = "split" the
// devices' rows of split(that key, n), which the step maps over.
pe::Array EngineTrainer::next_dropout_key(int64_t step) {
  const pr::Key key = dropout_keys_.next_step_key(step);
  if (spec_.rng.per_device != "split") return pr::key_data(key);
  return pr::split(pr::key_data(key), num_devices_);
}

// Each site's key and mask on every device, from the step's (key, keep) outputs.
std::vector<MaskDraw> EngineTrainer::dropout_draws(int64_t step, const pe::Tree& draws) const {
  std::vector<MaskDraw> recorded;
  for (const auto& [site, site_draw] : draws.entries()) {
    const DropoutDraw draw = StepSignature::dropout_draw(site_draw);
    const std::vector<int64_t> keys = draw.key.to_ints();
    const std::vector<int64_t> keep = draw.keep.to_ints();
    const size_t per_device = keep.size() / static_cast<size_t>(num_devices_);
    for (int64_t d = 0; d < num_devices_; ++d) {
      const auto begin = keep.begin() + static_cast<std::ptrdiff_t>(per_device * static_cast<size_t>(d));
      const std::vector<uint8_t> mask(begin, begin + static_cast<std::ptrdiff_t>(per_device));
      const auto word = [&](size_t i) { return static_cast<uint32_t>(keys[2 * static_cast<size_t>(d) + i]); };
      recorded.push_back(summarise_mask(step, d, site, plan_.dropout_rates.at(site), mask,
                                        RngKeyWords{word(0), word(1)}));
    }
  }
  return recorded;
}

ProducerSummary EngineTrainer::run(RunDirWriter* writer) {
  recorder_.emplace(spec_, writer, "device");
  const double setup_seconds = seconds_since(run_start_);
  for (int64_t step = 0; step < spec_.train.steps; ++step) {
    if (plan_.resume_step == step) resume_from_checkpoint(step);
    const StepInputs batch =
        step_inputs(train_, *placement_, step, spec_.train.grad_accum_steps, options_.step.float64);
    // Before the step: it donates the parameters and the batch statistics it reads.
    record_intermediates(step, batch);
    // The step's time is the mapped train_step's: what a JAX user's step costs. Gathering the
    // metrics and recording tensors are the harness's own work and stay outside it.
    const std::vector<pe::Tree> args = signature_.arguments(step_arguments(batch, step));
    const auto start = Clock::now();
    const StepResults out = signature_.results(placement_->step(args));
    step_seconds_.push_back(seconds_since(start));
    params_ = out.params;
    opt_state_ = out.opt_state;
    if (signature_.has_model_state()) batch_stats_ = out.model_state;
    StepRecord record = reduce_metrics(step, batch, out.loss);
    if (signature_.has_dropout() && recorder_->writes()) {
      record.rng_draws = dropout_draws(step, out.dropout_draws);
    }
    global_loss_ = record.loss;
    recorder_->check_losses_finite(record);
    // Every process takes part in the digest exchange; only process 0 records.
    const std::vector<uint64_t> digests =
        recorder_->records_tensors(step) ? replica_param_digests() : std::vector<uint64_t>{};
    record_step(record, out.grads, digests);
    report_progress(step, record.loss);
  }
  return finish(setup_seconds);
}

// S10 (002 §4.3): save replica 0 with the step and device count, then resume from the file on
// half the devices, each reading twice the samples (the same global batch).
void EngineTrainer::resume_from_checkpoint(int64_t step) {
  const std::filesystem::path file =
      options_.out_dir / "checkpoint" / fmt::format("step_{:06d}.safetensors", step);
  save_checkpoint(file, {step, num_devices_, device_params(0), device_opt_state(0)});
  peak_bytes_per_device_ = placement_->step.last_execution().peak_bytes_per_device;
  compile_count_ += placement_->step.cache_stats().misses;
  const Checkpoint restored = load_checkpoint(file, device_params(0), device_opt_state(0));
  num_devices_ = restored.device_count / 2;
  placement_.emplace(plan_.step, train_.num_samples, num_devices_, 0, num_devices_);
  params_ = replicate(restored.params, num_devices_);
  opt_state_ = replicate(restored.opt_state, num_devices_);
}

// Every device's loss, gathered from every process, and the global mean over their samples; a
// jit's one loss is the global mean itself (no replica has a loss of its own).
StepRecord EngineTrainer::reduce_metrics(int64_t step, const StepInputs& batch,
                                         const pe::Tree& step_loss) const {
  StepRecord record;
  record.step = step;
  if (layout().per_device_results) {
    record.replica_losses = gather_across_processes(batch.device_losses(step_loss));
    double loss_sum = 0;
    for (double loss : record.replica_losses) loss_sum += loss * batch.samples_per_device;
    record.loss = loss_sum / (batch.samples_per_device * static_cast<double>(num_devices_));
  } else {
    record.loss = batch.device_losses(step_loss).front();
  }
  record.step_seconds = step_seconds_.back();
  record.global_sample_ids = batch.global_sample_ids;
  return record;
}

// The parameter digest of every device of every process (the check that replicas agree); a
// jit's parameters are one global value (its devices' replicated blocks come from one SPMD
// program), so one digest.
std::vector<uint64_t> EngineTrainer::replica_param_digests() const {
  std::vector<uint64_t> local;
  const int64_t copies = layout().per_device_results ? placement_->local_devices : 1;
  for (int64_t d = 0; d < copies; ++d) {
    local.push_back(
        digest_named_tensors(tensors_from_params(device_params(d), plan_.step.name_separator)));
  }
  return gather_across_processes(local);
}

void EngineTrainer::record_step(StepRecord& record, const pe::Tree& step_grads,
                                const std::vector<uint64_t>& digests) const {
  if (!recorder_->writes()) return;
  // The tensors are the applied gradients, the norm the reduced ones', as ddp_ref records them
  // (they differ when the step clips: StepSignature::returned_grads).
  const auto device_0 = [&](const pe::Tree& tree) {
    return layout().per_device_results ? device_slice(tree, 0) : tree;
  };
  const pe::Tree grads = device_0(signature_.applied_grads(step_grads));
  const pe::Tree params = device_params(0);
  record.grad_norm = global_l2_norm(
      signature_.clips() ? device_0(signature_.reduced_grads(step_grads)) : grads);
  record.param_norm = global_l2_norm(params);
  recorder_->record_step(record);
  if (recorder_->records_tensors(record.step)) {
    const std::string& separator = plan_.step.name_separator;
    const NamedTensors batch_stats = signature_.has_model_state()
                                         ? tensors_from_params(device_batch_stats(0), separator)
                                         : NamedTensors{};
    recorder_->record_tensors(record.step, tensors_from_params(grads, separator),
                              tensors_from_params(params, separator), batch_stats, digests);
  }
}

// Device 0's layer outputs on its batch of `step` (its first micro-batch), from the parameters
// and batch statistics the step starts from: one eager forward, outside the step's time.
void EngineTrainer::record_intermediates(int64_t step, const StepInputs& batch) const {
  if (!recorder_->records_intermediates(step)) return;
  const LayerIntermediates captured =
      layer_model_intermediates(spec_.model, device_params(0), device_batch_stats(0),
                                device_slice(batch.first_micro_batch_inputs(), 0).leaf());
  NamedTensors outputs;
  for (const auto& [path, output] : captured.outputs) outputs.emplace(path, to_host(output));
  recorder_->record_intermediates(step, to_host(captured.input), outputs);
}

void EngineTrainer::report_progress(int64_t step, double loss) const {
  if (options_.on_step) options_.on_step(step + 1);
  if (options_.quiet || !recorder_->writes()) return;
  const int64_t steps = spec_.train.steps;
  if (step % std::max<int64_t>(1, steps / 10) != 0 && step + 1 != steps) return;
  std::cerr << fmt::format("parity pmap: step {:>5}/{}  loss {:.6f}  {:.1f} ms\n", step + 1, steps,
                           loss, step_seconds_.back() * 1e3);
}

ProducerSummary EngineTrainer::finish(double setup_seconds) {
  // After a resume on fewer devices: the peak of either placement, on the devices that remain.
  const int64_t peak =
      std::max(peak_bytes_per_device_, placement_->step.last_execution().peak_bytes_per_device);
  const std::vector<double> peaks = gather_across_processes(std::vector<double>(
      static_cast<size_t>(placement_->local_devices), static_cast<double>(peak)));
  ProducerSummary summary;
  summary.run_dir = options_.out_dir;
  summary.steps = spec_.train.steps;
  summary.final_loss = global_loss_;
  if (!recorder_->writes()) return summary;

  RunTotals totals;
  totals.setup_seconds = setup_seconds;
  totals.step_seconds = step_seconds_;
  totals.memory = memory_report(peaks);
  if (options_.evaluate) totals.results = evaluate();
  totals.results["final_loss"] = global_loss_;
  totals.results["compile_count"] =
      static_cast<double>(compile_count_ + placement_->step.cache_stats().misses);
  recorder_->finish(totals);
  if (totals.results.count("test_loss")) summary.test_loss = totals.results.at("test_loss");
  if (totals.results.count("test_accuracy")) {
    summary.test_accuracy = totals.results.at("test_accuracy");
  }
  return summary;
}

// Each device's peak (`peaks`, every process's devices), and what each device holds between
// steps: its parameters and optimizer state (whole under pmap, its blocks under jit's
// shardings), the same on every device.
MemoryReport EngineTrainer::memory_report(const std::vector<double>& peaks) const {
  MemoryReport memory;
  memory.method = placement_->step.memory_method();
  const DeviceStateBytes state =
      placement_->step.device_state_bytes(device_params(0), device_opt_state(0));
  memory.state_layout = state.layout;
  for (double bytes : peaks) {
    memory.peak_bytes_per_replica.push_back(static_cast<int64_t>(bytes));
    memory.param_bytes_per_replica.push_back(state.params);
    memory.optimizer_state_bytes_per_replica.push_back(state.opt_state);
  }
  return memory;
}

// The model's outputs for the test inputs x [N, D]: a widths model's in one batch; a layers
// model's in evaluation mode (device 0's parameters and running statistics) with an eval step
// a batch of kEvalBatch rows at a time, as a Flax user's eval loop goes through the test set (a
// CNN's activations for all of it at once would take gigabytes). The batches run side by side
// on this process's devices, one batch per device, as a JAX user would shard the eval step over
// them: shard_map(eval_step, mesh, in_specs=(P(), P(), P('batch')), out_specs=P('batch'))
// (jax/_src/shard_map.py). Each device runs the same per-batch program as a single-device jit
// would, so a row's output does not depend on how many devices share the work.
pe::Array EngineTrainer::test_outputs(const pe::Tree& params, const pe::Array& x) const {
  if (!signature_.has_model_state()) return mlp_forward(spec_.model, params, x);
  constexpr int64_t kEvalBatch = 1000;
  const ModelSpec model = spec_.model;
  const pe::TreeFunction eval_step = [model](const std::vector<pe::Tree>& args) {
    return pe::Tree(
        layer_model_apply(model, args[0], args[1], args[2].leaf(), /*train=*/false).outputs);
  };
  const pe::DeviceSet devices(static_cast<int>(placement_->local_devices));
  const pe::PartitionSpec replicated;
  const pe::PartitionSpec split{{"batch"}};
  std::map<int64_t, pe::ShardMapped> on_devices;  // by mesh size: traced once each
  const pe::Tree batch_stats = device_batch_stats(0);
  const int64_t num_samples = x.shape()[0];
  std::vector<pe::Array> outputs;
  // `batches` batches of `rows` rows from row `first`, one per device.
  const auto run = [&](int64_t first, int64_t batches, int64_t rows) {
    auto found = on_devices.find(batches);
    if (found == on_devices.end()) {
      const pe::Mesh mesh(devices, {{"batch", batches}});
      found = on_devices
                  .emplace(batches, pe::shard_map(eval_step, mesh,
                                                  {{replicated, replicated, split}, {split}, true, {}}))
                  .first;
    }
    const pe::Array block = pe::slice(x, {first, 0}, {first + batches * rows, x.shape()[1]});
    outputs.push_back(found->second({params, batch_stats, pe::Tree(block)}).leaf());
  };
  const int64_t full_batches = num_samples / kEvalBatch;
  for (int64_t batch = 0; batch < full_batches;) {
    const int64_t batches = std::min<int64_t>(devices.size(), full_batches - batch);
    run(batch * kEvalBatch, batches, kEvalBatch);
    batch += batches;
  }
  if (num_samples % kEvalBatch != 0) {
    run(full_batches * kEvalBatch, 1, num_samples % kEvalBatch);
  }
  return pe::concatenate(outputs, 0);
}

// test_loss, and test_accuracy for a classifier, of device 0's parameters on the test set.
std::map<std::string, double> EngineTrainer::evaluate() const {
  const pe::Tree params = device_params(0);
  const Dataset test = load_case_dataset(spec_, "test");
  const pe::DType dtype = params.leaves().front().dtype();
  const pe::Array x = pe::astype(
      pe::Array::from_floats({test.num_samples, test.feature_dim}, test.features), dtype);
  const pe::Array outputs = test_outputs(params, x);
  if (test.labels.empty()) {
    const pe::Array targets = pe::astype(
        pe::Array::from_floats({test.num_samples, test.target_dim}, test.targets), dtype);
    return {{"test_loss", pe::mse(outputs, targets).item()}};
  }
  std::vector<int32_t> labels(test.labels.begin(), test.labels.end());
  const pe::Array y = pe::Array::from_ints({test.num_samples}, labels);
  // Unsmoothed whatever model.label_smoothing says, as the Flax examples' eval_step
  // (label_smoothing=0.0) and ddp_ref's evaluation compute it.
  const double test_loss =
      pe::mean(pe::softmax_cross_entropy_with_integer_labels(outputs, y)).item();
  const std::vector<double> logits = outputs.to_doubles();
  const int64_t num_classes = outputs.shape()[1];
  int64_t correct = 0;
  for (int64_t i = 0; i < test.num_samples; ++i) {
    const auto row = logits.begin() + i * num_classes;
    const int64_t predicted = std::max_element(row, row + num_classes) - row;
    correct += predicted == test.labels[static_cast<size_t>(i)];
  }
  return {{"test_loss", test_loss},
          {"test_accuracy", static_cast<double>(correct) / static_cast<double>(test.num_samples)}};
}

}  // namespace parity::engine_trainer
