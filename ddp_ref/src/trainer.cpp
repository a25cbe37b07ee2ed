#include "trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "case_model.h"
#include "evaluation.h"
#include "held_state.h"
#include "memory_meter.h"
#include "model.h"
#include "parity/common/digest.h"
#include "parity/common/distributed_sampler.h"
#include "parity/common/error.h"
#include "parity/common/step_recorder.h"
#include "process_group.h"

namespace parity::ddp_ref {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

torch::Tensor features_view(const Dataset& dataset) {
  return torch::from_blob(const_cast<float*>(dataset.features.data()),
                          {dataset.num_samples, dataset.feature_dim}, torch::kFloat32);
}

torch::Tensor targets_view(const Dataset& dataset) {
  if (!dataset.labels.empty()) {
    return torch::from_blob(const_cast<int64_t*>(dataset.labels.data()), {dataset.num_samples},
                            torch::kInt64);
  }
  return torch::from_blob(const_cast<float*>(dataset.targets.data()),
                          {dataset.num_samples, dataset.target_dim}, torch::kFloat32);
}

// "rank 3 at step 10", "rank 3 before the first step" (kJoinedStep: the set-up, rendezvous
// and DDP's broadcast).
std::string rank_at(int64_t rank, int64_t step) {
  return step == kJoinedStep ? fmt::format("rank {} before the first step", rank)
                                 : fmt::format("rank {} at step {}", rank, step);
}

// Runs a collective-bearing call; a failure there is reported as a PeerFailure, since a
// missing or failed peer is what makes a collective fail or time out.
template <typename Fn>
auto in_collective(const std::string& what, int64_t rank, int64_t step, Fn&& fn) {
  try {
    return fn();
  } catch (const RunError&) {
    throw;
  } catch (const c10::Error& error) {
    throw PeerFailure(fmt::format("{}: {} failed: {}", rank_at(rank, step), what,
                                  error.what_without_backtrace()));
  } catch (const std::exception& error) {  // Gloo's own IoException and friends
    throw PeerFailure(fmt::format("{}: {} failed: {}", rank_at(rank, step), what, error.what()));
  }
}

// Each rank's numbers gathered on every rank: all ranks then take the same decisions.
template <typename T>
std::vector<T> all_gather_values(c10d::ProcessGroup& group, std::vector<T> values,
                                 int64_t world_size) {
  auto local = torch::tensor(values, c10::CppTypeToScalarType<T>::value);
  std::vector<std::vector<torch::Tensor>> gathered(1);
  for (int64_t r = 0; r < world_size; ++r) gathered[0].push_back(torch::empty_like(local));
  std::vector<torch::Tensor> inputs = {local};
  group.allgather(gathered, inputs)->wait();
  std::vector<T> out;
  for (const auto& tensor : gathered[0]) {
    auto accessor = tensor.accessor<T, 1>();
    for (int64_t i = 0; i < tensor.size(0); ++i) out.push_back(accessor[i]);
  }
  return out;
}

std::vector<double> all_gather_doubles(c10d::ProcessGroup& group, std::vector<double> values,
                                       int64_t world_size) {
  return all_gather_values(group, std::move(values), world_size);
}

// A rank's draws as words for the all-gather: per draw kept, size, the digest's bits, whether
// it has a key, the key's words, then the prefix padded to kMaskPrefixBits bits.
constexpr size_t kPrefixWords = kMaskPrefixBits / 64;
constexpr size_t kDrawWords = 6 + kPrefixWords;

std::vector<int64_t> draws_to_words(const std::vector<MaskDraw>& draws) {
  std::vector<int64_t> words;
  for (const MaskDraw& draw : draws) {
    const uint64_t digest = std::stoull(draw.digest, nullptr, 16);
    words.insert(words.end(), {draw.kept, draw.size, static_cast<int64_t>(digest),
                               draw.key ? 1 : 0, draw.key ? (*draw.key)[0] : 0,
                               draw.key ? (*draw.key)[1] : 0});
    std::vector<int64_t> prefix(kPrefixWords, 0);
    std::memcpy(prefix.data(), draw.prefix.data(), draw.prefix.size());
    words.insert(words.end(), prefix.begin(), prefix.end());
  }
  return words;
}

// Every rank's draws at `step` from the gathered words; `sites` in the order each rank drew.
std::vector<MaskDraw> draws_from_words(const std::vector<int64_t>& words, int64_t step,
                                       const std::vector<DropoutSite>& sites) {
  std::vector<MaskDraw> draws;
  for (size_t start = 0; start + kDrawWords <= words.size(); start += kDrawWords) {
    const size_t index = start / kDrawWords;
    MaskDraw draw;
    draw.step = step;
    draw.replica = static_cast<int64_t>(index / sites.size());
    draw.site = sites[index % sites.size()].path;
    draw.rate = sites[index % sites.size()].rate;
    draw.kept = words[start];
    draw.size = words[start + 1];
    draw.digest = fmt::format("{:016x}", static_cast<uint64_t>(words[start + 2]));
    if (words[start + 3] != 0) {
      draw.key = RngKeyWords{static_cast<uint32_t>(words[start + 4]),
                             static_cast<uint32_t>(words[start + 5])};
    }
    draw.prefix.resize(static_cast<size_t>((std::min(draw.size, kMaskPrefixBits) + 7) / 8));
    std::memcpy(draw.prefix.data(), &words[start + 6], draw.prefix.size());
    draws.push_back(std::move(draw));
  }
  return draws;
}

double global_l2_norm(const std::vector<torch::Tensor>& tensors) {
  double sum_of_squares = 0;
  for (const auto& tensor : tensors) {
    sum_of_squares += tensor.to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return std::sqrt(sum_of_squares);
}

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& param : params) grads.push_back(param.grad());
  return grads;
}

void check_gradients_finite(const CaseModelImpl& model, int64_t step) {
  for (const CanonicalParam& param : model.canonical_params()) {
    if (!torch::isfinite(canonical_part(param, param.tensor.grad())).all().item<bool>()) {
      throw RunError(fmt::format(
          "step {}: the gradient of {} is not finite after the all-reduce (on every rank, since "
          "they share the reduced gradient); the run stops here",
          step, param.name));
    }
  }
}

void apply_fault(const std::optional<FaultInjection>& fault, int64_t rank, int64_t step) {
  if (!fault || fault->rank != rank || fault->step != step) return;
  if (fault->kind == FaultInjection::Kind::kThrow) {
    throw RunError(fmt::format("rank {} at step {}: injected fault (--inject-fault)", rank, step));
  }
  if (fault->kind == FaultInjection::Kind::kExit) {
    std::cerr << fmt::format("parity: rank {} exits abruptly at step {} (--inject-fault)\n", rank,
                             step);
    std::_Exit(3);
  }
}

// What one optimizer step produced on this rank.
struct StepOutcome {
  double loss_sum = 0;  // sum of per-sample losses over this rank's micro-batches
  double sample_count = 0;
  std::vector<int64_t> global_sample_ids;  // all ranks' ids, rank-major, micro-batch order
};

class RankTrainer {
 public:
  explicit RankTrainer(const RankContext& context)
      : context_(context),
        spec_(*context.spec),
        rank_(context.rank),
        world_size_(context.world_size),
        model_(make_case_model(spec_.model, compute_dtype(spec_.train.dtype))),
        plan_(case_sampler_options(spec_, context.data->train.num_samples, world_size_),
              spec_.data.per_replica_batch),
        recorder_(spec_, context.writer, "rank"),
        dropout_sites_(dropout_sites(spec_.model)) {
    if (dropout_sites_.empty()) return;
    dropout_ = std::make_shared<DropoutStream>(spec_, rank_, world_size_);
    model_->set_dropout_stream(dropout_);
  }

  std::optional<ProducerSummary> run();

 private:
  void set_up();
  void exchange_addresses();
  StepOutcome forward_backward(int64_t step);
  void reduce_metrics(int64_t step, const StepOutcome& outcome);
  void clip_gradients(int64_t step);  // and measures grad_norm_
  void record_step(int64_t step, const StepOutcome& outcome, double step_seconds);
  std::vector<MaskDraw> gather_dropout_draws(int64_t step);
  void record_tensors(int64_t step, const NamedTensors& grads);
  void record_intermediates(int64_t step);
  void report_progress(int64_t step, double step_seconds) const;
  MemoryReport gather_memory();
  std::optional<ProducerSummary> finish(const std::vector<double>& step_seconds,
                                        double setup_seconds);
  void evaluate(ProducerSummary& summary);

  const RankContext& context_;
  const CaseSpec& spec_;
  int64_t rank_;
  int64_t world_size_;
  std::shared_ptr<CaseModelImpl> model_;
  DistributedBatchPlan plan_;
  StepRecorder recorder_;
  const std::vector<DropoutSite> dropout_sites_;
  std::shared_ptr<DropoutStream> dropout_;  // a model with dropout
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> params_;
  // The current step's numbers, the same on every rank once gathered.
  std::vector<double> replica_losses_;
  double global_loss_ = 0;
  double grad_norm_ = 0;
};

void RankTrainer::set_up() {
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(context_.options->timeout_seconds * 1000));
  const std::string rendezvous =
      context_.rendezvous.empty()
          ? fmt::format("rendezvous with {} ranks", world_size_)
          : fmt::format("rendezvous with {} ranks at {}", world_size_, context_.rendezvous);
  in_collective("joining the " + rendezvous, rank_, kJoinedStep, [&] {
    report_progress_to_store(*context_.store, rank_, kJoinedStep);
    return 0;
  });
  group_ = in_collective(rendezvous + " (process group)", rank_, kJoinedStep, [&] {
    return make_gloo_group(context_.store, rank_, world_size_, timeout);
  });
  params_ = model_->parameters();
  if (context_.init_params != nullptr) {
    load_canonical_params(*model_, *context_.init_params, context_.options->init_file.string());
  } else {
    // Other ranks start from different values on purpose (like separately initialised
    // torch modules): DDP's broadcast from rank 0 must make them equal (pitfall P4).
    torch::NoGradGuard no_grad;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(1000 + rank_);
    for (auto& param : params_) param.normal_(0.0, 1.0, generator);
  }
  ddp_ = in_collective("DDP construction (parameter check and broadcast)", rank_,
                       kJoinedStep, [&] {
    return std::make_unique<DistributedDataParallel>(params_, model_->buffers(), group_);
  });
  in_collective("exchanging process addresses", rank_, kJoinedStep,
                [&] { exchange_addresses(); });
  optimizer_ = make_optimizer(spec_.train, params_);
}

// Every rank has joined (DDP's broadcast has run): publish this rank's process and read all.
void RankTrainer::exchange_addresses() {
  if (context_.addresses == nullptr) return;
  const std::string mine = this_process_address();
  context_.store->set(address_key(rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
  for (int64_t rank = 0; rank < world_size_; ++rank) {
    const std::vector<uint8_t> bytes = context_.store->get(address_key(rank));
    const auto address = parse_process_address(std::string(bytes.begin(), bytes.end()));
    if (!address) continue;
    std::lock_guard<std::mutex> lock(context_.addresses->mutex);
    context_.addresses->by_rank[rank] = *address;
  }
}

StepOutcome RankTrainer::forward_backward(int64_t step) {
  const TrainingData& data = *context_.data;
  const int64_t micro_batches = spec_.train.grad_accum_steps;
  const bool inject_nan = context_.options->fault && context_.options->fault->rank == rank_ &&
                          context_.options->fault->step == step &&
                          context_.options->fault->kind == FaultInjection::Kind::kNan;
  StepOutcome outcome;
  if (dropout_) dropout_->begin_step(step);
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    StepBatches batches = plan_.step(step * micro_batches + micro);
    for (const auto& ids : batches.rank_sample_ids) {
      outcome.global_sample_ids.insert(outcome.global_sample_ids.end(), ids.begin(), ids.end());
    }
    const auto& ids = batches.rank_sample_ids[rank_];
    auto index = torch::tensor(ids, torch::kInt64);
    auto inputs = data.train_features.index_select(0, index);
    auto targets = data.train_targets.index_select(0, index);
    if (inject_nan) inputs = inputs * std::numeric_limits<float>::quiet_NaN();

    // DDP's no_sync() for all but the last micro-batch: gradients accumulate locally and
    // the last backward all-reduces the sum (pitfall P9's correct order).
    const bool sync = micro + 1 == micro_batches;
    ddp_->before_forward(sync);
    auto loss = compute_loss(spec_.model, model_->forward(inputs), targets);
    ddp_->after_forward(sync);
    auto scaled = micro_batches == 1 ? loss : loss / static_cast<double>(micro_batches);
    in_collective("backward with gradient all-reduce", rank_, step, [&] {
      scaled.backward();
      return 0;
    });
    outcome.loss_sum += loss.item<double>() * static_cast<double>(ids.size());
    outcome.sample_count += static_cast<double>(ids.size());
  }
  return outcome;
}

void RankTrainer::record_tensors(int64_t step, const NamedTensors& grads) {
  const NamedTensors params = export_canonical_params(*model_);
  std::vector<double> digests = in_collective("replica digest all-gather", rank_, step, [&] {
    double as_double;
    uint64_t digest = digest_named_tensors(params);
    std::memcpy(&as_double, &digest, sizeof digest);  // carried bit for bit through a double
    return all_gather_doubles(*group_, {as_double}, world_size_);
  });
  std::vector<uint64_t> replica_digests(digests.size());
  std::memcpy(replica_digests.data(), digests.data(), digests.size() * sizeof(uint64_t));
  recorder_.record_tensors(step, grads, params, model_->export_batch_stats(), replica_digests);
}

// The writing rank's (rank 0's) layer outputs on its batch of `step` (its first micro-batch),
// from the parameters the step starts from, before its forward: one forward of the model
// itself, not through DDP (no buffer broadcast, no reducer), outside the step's time.
void RankTrainer::record_intermediates(int64_t step) {
  if (!recorder_.records_intermediates(step)) return;
  const StepBatches batches = plan_.step(step * spec_.train.grad_accum_steps);
  const auto index = torch::tensor(batches.rank_sample_ids[rank_], torch::kInt64);
  const CapturedIntermediates captured =
      model_->capture_intermediates(context_.data->train_features.index_select(0, index));
  recorder_.record_intermediates(step, captured.input, captured.outputs);
}

void RankTrainer::reduce_metrics(int64_t step, const StepOutcome& outcome) {
  std::vector<double> gathered = in_collective("loss all-gather", rank_, step, [&] {
    return all_gather_doubles(*group_, {outcome.loss_sum, outcome.sample_count}, world_size_);
  });
  replica_losses_.clear();
  double loss_sum = 0;
  double sample_count = 0;
  for (int64_t r = 0; r < world_size_; ++r) {
    replica_losses_.push_back(gathered[2 * r] / gathered[2 * r + 1]);
    loss_sum += gathered[2 * r];
    sample_count += gathered[2 * r + 1];
  }
  global_loss_ = loss_sum / sample_count;
  StepRecord record;
  record.step = step;
  record.replica_losses = replica_losses_;
  recorder_.check_losses_finite(record);
}

void RankTrainer::clip_gradients(int64_t step) {
  check_gradients_finite(*model_, step);
  if (spec_.train.clip_grad_norm > 0) {
    // torch.nn.utils.clip_grad_norm_ returns the norm before clipping.
    grad_norm_ = torch::nn::utils::clip_grad_norm_(params_, spec_.train.clip_grad_norm);
  } else {
    grad_norm_ = global_l2_norm(gradients_of(params_));
  }
}

// Every rank's masks of the step, on every rank (a collective: all ranks call it).
std::vector<MaskDraw> RankTrainer::gather_dropout_draws(int64_t step) {
  if (!dropout_) return {};
  const std::vector<int64_t> words = in_collective("dropout mask all-gather", rank_, step, [&] {
    return all_gather_values(*group_, draws_to_words(dropout_->take_draws()), world_size_);
  });
  return draws_from_words(words, step, dropout_sites_);
}

void RankTrainer::record_step(int64_t step, const StepOutcome& outcome, double step_seconds) {
  std::vector<MaskDraw> draws = gather_dropout_draws(step);
  if (!recorder_.writes()) return;
  StepRecord record;
  record.rng_draws = std::move(draws);
  record.step = step;
  record.loss = global_loss_;
  record.replica_losses = replica_losses_;
  record.grad_norm = grad_norm_;
  record.param_norm = global_l2_norm(params_);
  record.step_seconds = step_seconds;
  record.global_sample_ids = outcome.global_sample_ids;
  recorder_.record_step(record);
}

void RankTrainer::report_progress(int64_t step, double step_seconds) const {
  if (rank_ != 0) return;
  if (context_.options->on_step) context_.options->on_step(step + 1);
  if (context_.options->quiet) return;
  const int64_t steps = spec_.train.steps;
  const int64_t every = std::max<int64_t>(1, steps / 10);
  if (step % every != 0 && step + 1 != steps) return;
  std::cerr << fmt::format("parity ddp: step {:>5}/{}  loss {:.6f}  grad_norm {:.4g}  {:.1f} ms\n",
                           step + 1, steps, global_loss_, grad_norm_, step_seconds * 1e3);
}

std::optional<ProducerSummary> RankTrainer::run() {
  set_up();
  const double setup_seconds = seconds_since(context_.run_start);
  std::vector<double> step_seconds;
  for (int64_t step = 0; step < spec_.train.steps; ++step) {
    // The store lives in process 0: when that process is gone, this write fails first (a broken
    // pipe), and the failure is the peer's, as a failed collective's is.
    in_collective("progress report to the rendezvous store", rank_, step, [&] {
      report_progress_to_store(*context_.store, rank_, step);
      return 0;
    });
    apply_fault(context_.options->fault, rank_, step);
    record_intermediates(step);
    // The step's time is what a DDP user's step costs: zero_grad, forward, backward with the
    // all-reduce, optimizer step. Gathering the metrics (one more collective) and recording
    // tensors are the harness's own work and stay outside it.
    auto start = Clock::now();
    optimizer_->zero_grad();
    StepOutcome outcome = forward_backward(step);
    double seconds = seconds_since(start);
    reduce_metrics(step, outcome);
    start = Clock::now();
    clip_gradients(step);
    seconds += seconds_since(start);
    // The gradients recorded are the ones the optimizer applies, clipped where the case clips
    // (what .grad holds after clip_grad_norm_, as parity_torch_log records it); grad_norm is
    // the norm before clipping.
    const bool recorded = recorder_.records_tensors(step);
    NamedTensors grads;
    if (recorded && context_.writer != nullptr) grads = export_canonical_grads(*model_);
    start = Clock::now();
    optimizer_->step();
    step_seconds.push_back(seconds + seconds_since(start));
    record_step(step, outcome, step_seconds.back());
    if (recorded) record_tensors(step, grads);
    report_progress(step, step_seconds.back());
  }
  return finish(step_seconds, setup_seconds);
}

void RankTrainer::evaluate(ProducerSummary& summary) {
  const TrainingData& data = *context_.data;
  // Eval mode: BatchNorm normalises with its running statistics, dropout is off.
  const torch::Tensor outputs = evaluation_outputs(*model_, data.test_features);
  torch::NoGradGuard no_grad;
  // The test loss is the plain cross-entropy, as the engine's and the Flax examples' eval_step
  // (label_smoothing=0.0) compute it: it measures the model, not the training targets.
  ModelSpec unsmoothed = spec_.model;
  unsmoothed.label_smoothing = 0;
  summary.test_loss = compute_loss(unsmoothed, outputs, data.test_targets).item<double>();
  if (spec_.model.loss == "softmax_cross_entropy") {
    summary.test_accuracy =
        outputs.argmax(1).eq(data.test_targets).to(torch::kFloat64).mean().item<double>();
  }
}

// Every rank's peak, and what it holds between steps: its parameters and its optimizer's state,
// each a full copy (held_state.h), as (peak, params, optimizer state) per rank.
MemoryReport RankTrainer::gather_memory() {
  constexpr size_t kFigures = 3;
  const std::vector<double> gathered =
      in_collective("memory all-gather", rank_, spec_.train.steps, [&] {
        return all_gather_doubles(
            *group_,
            {static_cast<double>(MemoryMeter::peak_bytes(rank_)),
             static_cast<double>(tensor_bytes(params_)),
             static_cast<double>(optimizer_state_bytes(*optimizer_))},
            world_size_);
      });
  MemoryReport memory;
  memory.method = MemoryMeter::method();
  memory.state_layout =
      "DDP: a full copy on every rank (DistributedDataParallel replicates the module; each "
      "rank's optimizer keeps its own state)";
  for (size_t r = 0; r + kFigures <= gathered.size(); r += kFigures) {
    memory.peak_bytes_per_replica.push_back(static_cast<int64_t>(gathered[r]));
    memory.param_bytes_per_replica.push_back(static_cast<int64_t>(gathered[r + 1]));
    memory.optimizer_state_bytes_per_replica.push_back(static_cast<int64_t>(gathered[r + 2]));
  }
  return memory;
}

std::optional<ProducerSummary> RankTrainer::finish(const std::vector<double>& step_seconds,
                                                   double setup_seconds) {
  MemoryReport memory = gather_memory();
  if (!recorder_.writes()) return std::nullopt;

  ProducerSummary summary;
  summary.run_dir = context_.writer->dir();
  summary.steps = spec_.train.steps;
  summary.final_loss = global_loss_;
  evaluate(summary);
  RunTotals totals;
  totals.setup_seconds = setup_seconds;
  totals.step_seconds = step_seconds;
  totals.memory = std::move(memory);
  totals.results["final_loss"] = summary.final_loss;
  totals.results["test_loss"] = *summary.test_loss;
  if (summary.test_accuracy) totals.results["test_accuracy"] = *summary.test_accuracy;
  totals.results["process_max_rss_bytes"] = static_cast<double>(process_max_rss_bytes());
  recorder_.finish(totals);
  return summary;
}

}  // namespace

TrainingData load_training_data(const CaseSpec& spec) {
  TrainingData data;
  data.train = load_case_dataset(spec, "train");
  data.test = load_case_dataset(spec, "test");
  data.train_features = features_view(data.train);
  data.train_targets = targets_view(data.train);
  data.test_features = features_view(data.test);
  data.test_targets = targets_view(data.test);
  return data;
}

std::optional<ProducerSummary> train_rank(const RankContext& context) {
  MemoryMeter::ScopedSlot memory_slot(context.rank);
  RankTrainer trainer(context);
  return trainer.run();
}

std::string progress_key(int64_t rank) { return fmt::format("parity/progress/{}", rank); }

std::string address_key(int64_t rank) { return fmt::format("parity/process/{}", rank); }

void report_progress_to_store(c10d::Store& store, int64_t rank, int64_t step) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&step);
  store.set(progress_key(rank), std::vector<uint8_t>(bytes, bytes + sizeof step));
}

}  // namespace parity::ddp_ref
