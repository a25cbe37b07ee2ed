#include "pmap_trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

#include "parity/common/dataset.h"
#include "parity/common/digest.h"
#include "parity/common/distributed_sampler.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/peer_processes.h"
#include "parity/common/run_dir.h"
#include "parity/common/step_timing.h"
#include "parity/common/tensor_file.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random.h"
#include "checkpoint.h"
#include "pmap_engine/distributed.h"
#include "pmap_processes.h"
#include "scenario_programs.h"

namespace parity::cases {
namespace {

using Clock = std::chrono::steady_clock;

// The trees (one per device, same structure) stacked leaf by leaf on a new leading device axis.
pe::Tree stack(const std::vector<pe::Tree>& per_device) {
  std::vector<std::vector<pe::Array>> leaves;
  for (const pe::Tree& tree : per_device) leaves.push_back(tree.leaves());
  size_t leaf = 0;
  return pe::tree_map(
      [&](const pe::Array&) {
        const pe::Buffer& first = leaves.front()[leaf].buffer();
        pe::Shape shape = first.shape;
        shape.insert(shape.begin(), static_cast<int64_t>(per_device.size()));
        pe::Buffer stacked = pe::Buffer::allocate(first.dtype, shape);
        for (size_t d = 0; d < per_device.size(); ++d) {
          std::memcpy(stacked.bytes->data() + d * first.num_bytes(),
                      leaves[d][leaf].buffer().bytes->data(), first.num_bytes());
        }
        ++leaf;
        return pe::Array(stacked);
      },
      per_device.front());
}

// Device d's value of a tree with a leading device axis (params[d] in JAX).
pe::Tree device_slice(const pe::Tree& tree, int64_t d) {
  return pe::tree_map(
      [d](const pe::Array& leaf) {
        const pe::Buffer& source = leaf.buffer();
        pe::Shape shape(source.shape.begin() + 1, source.shape.end());
        pe::Buffer slice = pe::Buffer::allocate(source.dtype, shape);
        std::memcpy(slice.bytes->data(),
                    source.bytes->data() + static_cast<size_t>(d) * slice.num_bytes(),
                    slice.num_bytes());
        return pe::Array(slice);
      },
      tree);
}

double global_l2_norm(const pe::Tree& tree) {
  double sum_of_squares = 0;
  for (const auto& leaf : tree.leaves()) {
    for (double value : leaf.to_doubles()) sum_of_squares += value * value;
  }
  return std::sqrt(sum_of_squares);
}

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

// One optimizer step's inputs: its batch, or with train.grad_accum_steps = k its k
// micro-batches as tuples (batch s*k + m is micro-batch m of step s, as ddp_ref reads them).
struct StepInputs {
  pe::Tree inputs, targets;
  std::vector<int64_t> global_sample_ids;  // micro-batch-major, then device-major
  std::vector<double> micro_batch_sizes;   // samples per device in each micro-batch
  double samples_per_device = 0;           // over all micro-batches

  // Each device's loss over the step's samples, from the step's loss output: one value per
  // device, or a tuple with one per micro-batch, weighed by their sizes as ddp_ref weighs them
  // (the last micro-batch of an epoch may be shorter).
  std::vector<double> device_losses(const pe::Tree& output) const {
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
};

// Where a run trains: its devices, the sampler plan that feeds them (ddp_ref's, for that many
// ranks) and the pmapped step compiled for them. The global batch stays the case's: fewer
// devices read more samples each.
//
// With `readers` > 1 every one of that many processes feeds its own devices from a plan it made
// alone, P8's mistake (002 §3.2): each shards the whole dataset over its local devices only,
// without jax.process_index(), so all feed the same samples. A run in one process computes what
// the multi-process run does (the same global pmap over the same batches).
//
// `num_devices` counts every process's devices; this process runs `local_devices` of them,
// from `first_device` on (all of them in a single-process run).
struct Placement {
  int64_t readers;  // processes reading the whole dataset (P8); 1: one plan for all devices
  int64_t first_device;
  int64_t local_devices;
  DistributedBatchPlan plan;
  pe::Pmapped step;

  Placement(const CaseSpec& spec, int64_t dataset_size, int64_t num_devices,
            int64_t first_device, int64_t local_devices, const PmapStepOptions& step_options,
            int64_t readers = 1)
      : readers(readers),
        first_device(first_device),
        local_devices(local_devices),
        plan(sampler_options(spec, dataset_size, num_devices / readers),
             spec.data.per_replica_batch * spec.parallel.replicas / num_devices),
        step(make_pmap_train_step(spec, pe::DeviceSet(static_cast<int>(local_devices)),
                                  step_options)) {}

  // Batch `index` for every device of every process, process-major.
  StepBatches batches(int64_t index) const {
    StepBatches batches = plan.step(index);
    const std::vector<std::vector<int64_t>> per_process = batches.rank_sample_ids;
    for (int64_t p = 1; p < readers; ++p) {
      batches.rank_sample_ids.insert(batches.rank_sample_ids.end(), per_process.begin(),
                                     per_process.end());
    }
    return batches;
  }

  static DistributedSamplerOptions sampler_options(const CaseSpec& spec, int64_t dataset_size,
                                                   int64_t num_replicas) {
    DistributedSamplerOptions sampler;
    sampler.dataset_size = dataset_size;
    sampler.num_replicas = num_replicas;
    sampler.shuffle = spec.data.shuffle;
    sampler.seed = spec.data.seed;
    sampler.drop_last = spec.data.drop_last;
    return sampler;
  }
};

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

void evaluate(const CaseSpec& spec, const pe::Tree& params, RunInfo& info) {
  Dataset test = load_case_dataset(spec, "test");
  const pe::DType dtype = params.leaves().front().dtype();
  pe::Array x = pe::astype(
      pe::Array::from_floats({test.num_samples, test.feature_dim}, test.features), dtype);
  pe::Array outputs = mlp_forward(spec.model, params, x);
  if (test.labels.empty()) {
    pe::Array targets = pe::astype(
        pe::Array::from_floats({test.num_samples, test.target_dim}, test.targets), dtype);
    info.results["test_loss"] = pe::mse(outputs, targets).item();
    return;
  }
  std::vector<int32_t> labels(test.labels.begin(), test.labels.end());
  pe::Array y = pe::Array::from_ints({test.num_samples}, labels);
  info.results["test_loss"] =
      pe::mean(pe::softmax_cross_entropy_with_integer_labels(outputs, y)).item();
  std::vector<double> logits = outputs.to_doubles();
  const int64_t num_classes = spec.model.widths.back();
  int64_t correct = 0;
  for (int64_t i = 0; i < test.num_samples; ++i) {
    const auto row = logits.begin() + i * num_classes;
    const int64_t predicted = std::max_element(row, row + num_classes) - row;
    correct += predicted == test.labels[static_cast<size_t>(i)];
  }
  info.results["test_accuracy"] =
      static_cast<double>(correct) / static_cast<double>(test.num_samples);
}

// Pitfall P4 as 000 §4.4 describes it: every device initialises its own parameters, from
// fold_in(PRNGKey(seed), device), instead of one initialisation broadcast to all.
pe::Tree initialise_per_device(const CaseSpec& spec, int64_t num_devices, pe::DType dtype) {
  namespace pr = pmap_engine::random;
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

pe::Tree replicate(const pe::Tree& tree, int64_t num_devices) {
  return stack(std::vector<pe::Tree>(static_cast<size_t>(num_devices), tree));
}

pe::Pmapped make_pmap_train_step(const CaseSpec& spec, const pe::DeviceSet& devices,
                                 const PmapStepOptions& step_options) {
  const ModelSpec model = spec.model;
  const pe::DType dtype = step_options.float64 ? pe::DType::f64 : compute_dtype(spec.train.dtype);
  const pe::optim::GradientTransformation optimizer = make_optimizer(spec.train);
  const EngineProgram& program = find_engine_program(step_options.program);
  const bool cast_loss = !program.keeps_loss_in_compute_dtype;
  pe::TreeFunction loss_fn = [model, dtype, cast_loss](const std::vector<pe::Tree>& args) {
    return pe::Tree(mlp_loss(model, args[0], args[1].leaf(), args[2].leaf(), dtype, cast_loss));
  };
  const MappedGradients gradients = mapped_gradients(program, loss_fn);
  const int64_t micro_batches = spec.train.grad_accum_steps;
  const bool update_each = program.updates_per_micro_batch;
  pe::TreeFunction step = [optimizer, gradients, micro_batches,
                           update_each](const std::vector<pe::Tree>& args) {
    pe::Tree params = args[0];
    pe::Tree state = args[1];
    const auto update = [&](const pe::Tree& grads) {
      auto [updates, new_state] = optimizer.update(grads, state, params);
      params = pe::optim::apply_updates(params, updates);
      state = new_state;
    };
    if (micro_batches == 1) {
      // Seed 002's train_step_parallel: the program's (loss, grads), then the optax update.
      const pe::Tree loss_and_grads = gradients.local({params, args[2], args[3]});
      const pe::Tree grads = gradients.reduce(loss_and_grads[1]);
      update(grads);
      return pe::Tree::tuple({params, state, loss_and_grads[0], grads});
    }
    // Micro-batches: args[2] and args[3] are tuples of k batches. 002 §3.3 accumulates the
    // gradients (each of loss / k, as DDP scales the loss under no_sync), reduces once and
    // updates once; the P9 program updates after every micro-batch instead.
    const auto k = static_cast<double>(micro_batches);
    std::vector<pe::Tree> losses;  // per micro-batch: the host weighs them by their sizes
    pe::Tree accumulated;
    pe::Tree last_grads;
    for (int64_t m = 0; m < micro_batches; ++m) {
      const auto index = static_cast<size_t>(m);
      const pe::Tree loss_and_grads = gradients.local({params, args[2][index], args[3][index]});
      losses.push_back(loss_and_grads[0]);
      if (update_each) {
        last_grads = gradients.reduce(loss_and_grads[1]);
        update(last_grads);
        continue;
      }
      const pe::Tree scaled =
          pe::tree_map([k](const pe::Array& g) { return g / k; }, loss_and_grads[1]);
      accumulated = m == 0
                        ? scaled
                        : pe::tree_map([](const pe::Array& a, const pe::Array& g) { return a + g; },
                                       accumulated, scaled);
    }
    if (!update_each) {
      last_grads = gradients.reduce(accumulated);
      update(last_grads);
    }
    return pe::Tree::tuple({params, state, pe::Tree::tuple(losses), last_grads});
  };
  pe::PmapOptions options;
  options.axis_name = gradients.axis_name;
  if (program.broadcasts_params) {
    // 000 §5.3: @pmap(axis_name=..., in_axes=(None, 0, 0)): params and optimizer state go to
    // every device whole and come back as the one value all devices hold (out_axes=None, which
    // the engine checks bit for bit).
    options.in_axes = {std::nullopt, std::nullopt, 0, 0};
    options.out_axes = {std::nullopt, std::nullopt, 0, 0};
  }
  options.donate_argnums = {0, 1};
  options.devices = devices;
  if (step_options.check_replicas) options.check_replicated_outputs = {0, 1};
  return pe::pmap(step, options);
}

namespace {

// The process this run is, and the engine's distributed session for as long as it trains.
class ProcessSession {
 public:
  ProcessSession(const CaseSpec& spec, const EngineProgram& program, double timeout_seconds)
      : process_(pmap_process_from_environment()) {
    if (!process_) return;
    const int64_t count = process_->count;
    if (count != spec.parallel.processes) {
      throw InputError(fmt::format(
          "case {}: this engine process is one of {} but the case says parallel.processes = {}; "
          "start the run with parity pmap --nproc {}",
          spec.name, count, spec.parallel.processes, spec.parallel.processes));
    }
    if (program.needs_one_process()) {
      throw InputError(fmt::format(
          "case {}: engine program {} runs in one process only; set parallel.processes = 1",
          spec.name, program.name));
    }
    pmap_engine::distributed::InitializeOptions options;
    options.coordinator_address = process_->coordinator;
    options.num_processes = static_cast<int>(count);
    options.process_id = static_cast<int>(process_->index);
    options.local_device_count = static_cast<int>(spec.parallel.replicas / count);
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
    try {
      pmap_engine::distributed::initialize(options);
    } catch (const pe::EngineError& error) {
      throw RunError(fmt::format("engine process {} of {}: {}", process_->index, count,
                                 error.what()));
    }
  }
  ~ProcessSession() {
    if (process_) pmap_engine::distributed::shutdown();
  }
  ProcessSession(const ProcessSession&) = delete;
  ProcessSession& operator=(const ProcessSession&) = delete;

  int64_t index() const { return process_ ? process_->index : 0; }
  int64_t count() const { return process_ ? process_->count : 1; }
  bool writes() const { return index() == 0; }  // process 0 writes the run directory

 private:
  std::optional<PmapProcess> process_;
};

// `writer` is process 0's run directory, owned by the caller so that a failure can still be
// recorded in it.
PmapRunSummary train_pmap(const CaseSpec& spec, const PmapRunOptions& options,
                          std::optional<RunDirWriter>& writer) {
  const auto run_start = Clock::now();
  const EngineProgram& program = find_engine_program(options.step.program);
  require_training_program(spec, program);
  const ProcessSession process(spec, program, options.timeout_seconds);
  int64_t num_devices = spec.parallel.replicas;  // every process's
  const int64_t local_devices = num_devices / process.count();
  const int64_t first_device = process.index() * local_devices;
  const bool float64 = options.step.float64;
  pe::Tree initial = params_from_tensors(read_safetensors(options.init_file).tensors);
  if (float64) initial = cast_tree(initial, pe::DType::f64);
  // Broadcast params (in_axes=None) stay one unstacked tree; otherwise every leaf carries the
  // device axis, as jax.device_put_replicated makes it.
  const bool broadcast = program.broadcasts_params;
  const pe::Tree initial_state = make_optimizer(spec.train).init(initial);
  pe::Tree params = broadcast ? initial
                    : program.initialises_per_device
                        ? initialise_per_device(spec, num_devices, initial.leaves().front().dtype())
                        : replicate(initial, local_devices);
  pe::Tree opt_state = broadcast ? initial_state : replicate(initial_state, local_devices);
  const auto device_params = [&](int64_t d) {
    return broadcast ? params : device_slice(params, d);
  };
  Dataset train = load_case_dataset(spec, "train");
  std::optional<Placement> placement;
  placement.emplace(spec, train.num_samples, num_devices, first_device, local_devices,
                    options.step, processes_reading_everything(spec, program));
  const std::optional<int64_t> checkpoint_step = resume_step(spec, program);
  int64_t peak_bytes_per_device = 0;
  int64_t compile_count = 0;

  RunInfo run_info = run_info_for_case(spec, "pmap_engine");
  if (float64) run_info.dtype = "f64";
  run_info.processes = process.count();
  run_info.versions["pmap_engine"] = PARITY_VERSION;
  if (process.writes()) writer.emplace(options.out_dir, run_info, options.overwrite);
  const double setup_seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
  std::vector<double> step_seconds;
  const auto& record = spec.train.record_steps;
  double global_loss = 0;
  for (int64_t s = 0; s < spec.train.steps; ++s) {
    if (checkpoint_step == s) {
      // S10 (002 §4.3): save replica 0 with the step and device count, then resume from the
      // file on half the devices, each reading twice the samples (the same global batch).
      const std::filesystem::path file =
          options.out_dir / "checkpoint" / fmt::format("step_{:06d}.safetensors", s);
      save_checkpoint(file, {s, num_devices, device_params(0), device_slice(opt_state, 0)});
      peak_bytes_per_device = placement->step.last_execution().peak_bytes_per_device;
      compile_count += placement->step.cache_stats().misses;
      const Checkpoint restored =
          load_checkpoint(file, device_params(0), device_slice(opt_state, 0));
      num_devices = restored.device_count / 2;
      placement.emplace(spec, train.num_samples, num_devices, 0, num_devices, options.step);
      params = replicate(restored.params, num_devices);
      opt_state = replicate(restored.opt_state, num_devices);
    }
    const StepInputs batch =
        step_inputs(train, *placement, s, spec.train.grad_accum_steps, float64);
    const auto start = Clock::now();
    pe::Tree out = placement->step({params, opt_state, batch.inputs, batch.targets});
    step_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    params = out[0];
    opt_state = out[1];

    StepMetrics metrics;
    metrics.step = s;
    metrics.replica_losses = gather_across_processes(batch.device_losses(out[2]));
    double loss_sum = 0;
    for (double loss : metrics.replica_losses) loss_sum += loss * batch.samples_per_device;
    global_loss = loss_sum / (batch.samples_per_device * static_cast<double>(num_devices));
    for (size_t d = 0; d < metrics.replica_losses.size(); ++d) {
      if (!std::isfinite(metrics.replica_losses[d])) {
        std::string why = fmt::format("step {}: the loss is not finite on device {}", s, d);
        if (writer) writer->mark_incomplete(why);
        throw RunError(why);
      }
    }
    // Every device's parameter digest, gathered from every process.
    const auto local_count = placement->local_devices;
    std::vector<uint64_t> local_digests;
    const bool records = std::find(record.begin(), record.end(), s) != record.end();
    for (int64_t d = 0; records && d < local_count; ++d) {
      local_digests.push_back(digest_named_tensors(tensors_from_params(device_params(d))));
    }
    const std::vector<uint64_t> digests =
        records ? gather_across_processes(local_digests) : std::vector<uint64_t>{};
    if (!writer) {
      if (options.on_step) options.on_step(s + 1);
      continue;
    }
    const pe::Tree grads = device_slice(out[3], 0);
    const pe::Tree device0_params = device_params(0);
    metrics.loss = global_loss;
    metrics.grad_norm = global_l2_norm(grads);
    metrics.param_norm = global_l2_norm(device0_params);
    metrics.lr = spec.train.lr;
    metrics.step_seconds = step_seconds.back();
    metrics.samples_digest = digest_sample_ids(batch.global_sample_ids);
    metrics.samples_set_digest = digest_sample_set(batch.global_sample_ids);
    metrics.duplicate_samples = count_duplicates(batch.global_sample_ids);
    writer->append_step(metrics);
    if (records) {
      NamedTensors tensors;
      for (auto& [name, tensor] : tensors_from_params(grads))
        tensors.emplace("grads/" + name, tensor);
      for (auto& [name, tensor] : tensors_from_params(device0_params)) {
        tensors.emplace("params/" + name, tensor);
      }
      // The digest ddp_ref records per replica, stored bit for bit in I64 slots.
      HostTensor slots = HostTensor::zeros(DType::I64, {static_cast<int64_t>(digests.size())});
      std::memcpy(slots.data_as<int64_t>(), digests.data(), digests.size() * sizeof(uint64_t));
      tensors.emplace("replicas/param_digests", std::move(slots));
      writer->write_tensors(s, tensors);
    }
    if (options.on_step) options.on_step(s + 1);
    if (!options.quiet &&
        (s % std::max<int64_t>(1, spec.train.steps / 10) == 0 || s + 1 == spec.train.steps)) {
      std::cerr << fmt::format("parity pmap: step {:>5}/{}  loss {:.6f}  {:.1f} ms\n", s + 1,
                               spec.train.steps, global_loss, step_seconds.back() * 1e3);
    }
  }

  // After a resume on fewer devices: the peak of either placement, on the devices that remain.
  peak_bytes_per_device =
      std::max(peak_bytes_per_device, placement->step.last_execution().peak_bytes_per_device);
  const std::vector<double> peaks =
      gather_across_processes(std::vector<double>(static_cast<size_t>(placement->local_devices),
                                                  static_cast<double>(peak_bytes_per_device)));
  compile_count += placement->step.cache_stats().misses;
  PmapRunSummary summary;
  summary.run_dir = options.out_dir;
  summary.final_loss = global_loss;
  if (!writer) return summary;

  RunInfo& info = writer->info();
  info.timings = summarize_step_times(setup_seconds, step_seconds);
  info.memory.method = "pmap_engine planner: exact peak of live buffers per device";
  for (double peak : peaks) info.memory.peak_bytes_per_replica.push_back(static_cast<int64_t>(peak));
  info.results["final_loss"] = global_loss;
  info.results["compile_count"] = static_cast<double>(compile_count);
  evaluate(spec, device_params(0), info);
  writer->finish();
  if (info.results.count("test_accuracy")) summary.test_accuracy = info.results["test_accuracy"];
  return summary;
}

// "process 1 (pid 4242, exited)": the processes the kernel says are gone or stopped.
std::string describe_lost_processes(const pe::distributed::CollectiveFailed& error) {
  std::map<int64_t, ProcessAddress> processes;
  const auto& addresses = error.process_addresses();
  for (size_t p = 0; p < addresses.size(); ++p) {
    if (const auto address = parse_process_address(addresses[p])) {
      processes[static_cast<int64_t>(p)] = *address;
    }
  }
  return describe_lost_ranks(processes, "process");
}

}  // namespace

PmapRunSummary run_pmap(const CaseSpec& spec, const PmapRunOptions& options) {
  std::optional<RunDirWriter> writer;
  try {
    return train_pmap(spec, options, writer);
  } catch (const pe::distributed::CollectiveFailed& error) {
    const std::string lost = describe_lost_processes(error);
    const std::string why =
        lost.empty() ? error.what()
                     : fmt::format("lost engine {}; it died or was stopped, so the cross-process "
                                   "collectives cannot complete",
                                   lost);
    if (writer) writer->mark_incomplete(why);
    throw RunError(why);
  }
}

}  // namespace parity::cases
