// Starting ranks (threads of this process, or processes), and turning their failures into one
// message that names the rank that caused them.
#include <fmt/format.h>
#include <cblas.h>
#include <gloo/config.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "case_model.h"
#include "layer_model.h"
#include "memory_meter.h"
#include "model.h"
#include "parity/common/error.h"
#include "parity/common/peer_processes.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "trainer.h"

namespace parity::ddp_ref {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds timeout_of(const DdpOptions& options) {
  return std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
}

// Fails fast, before any rank starts, on an init file that does not fit the case's model.
NamedTensors load_and_check_init(const CaseSpec& spec, const DdpOptions& options) {
  NamedTensors tensors = read_safetensors(options.init_file).tensors;
  load_canonical_params(*make_case_model(spec.model), tensors, options.init_file.string());
  return tensors;
}

RunInfo make_run_info(const CaseSpec& spec, int64_t processes) {
  RunInfo info = run_info_for_case(spec, "ddp_ref");
  info.processes = processes;
  info.parallel_style = "ddp";
  info.versions["libtorch"] = TORCH_VERSION;
  info.versions["gloo"] =
      fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
  return info;
}

// A fault that names a rank or step the run does not have would do nothing, and the run would
// pass as if the fault had been survived: refuse it before any rank starts.
void check_fault_fits(const CaseSpec& spec, const DdpOptions& options) {
  if (!options.fault) return;
  const FaultInjection& fault = *options.fault;
  if (fault.rank >= spec.parallel.replicas) {
    throw InputError(fmt::format(
        "--inject-fault names rank {}, but case {} has {} ranks (0..{}); name one of them",
        fault.rank, spec.name, spec.parallel.replicas, spec.parallel.replicas - 1));
  }
  if (fault.step >= spec.train.steps) {
    throw InputError(fmt::format(
        "--inject-fault names step {}, but case {} trains {} steps (0..{}); name one of them",
        fault.step, spec.name, spec.train.steps, spec.train.steps - 1));
  }
}

// A rank's failure as its thread saw it.
struct RankFailure {
  int64_t rank = 0;
  std::string message;
  bool caused_by_peer = false;  // a collective failed: the cause is probably elsewhere
};

std::optional<int64_t> read_int64_key(c10d::Store& store, const std::string& key) {
  try {
    if (!store.check({key})) return std::nullopt;
    std::vector<uint8_t> bytes = store.get(key);
    if (bytes.size() != sizeof(int64_t)) return std::nullopt;
    int64_t value;
    std::memcpy(&value, bytes.data(), sizeof value);
    return value;
  } catch (const std::exception&) {
    return std::nullopt;  // the store itself is gone (its host process died)
  }
}

// When every failure we saw is a failed collective, the ranks that never joined or fell behind
// (by their last reported step) are the ones the others were waiting for.
std::string describe_stragglers(c10d::Store& store, int64_t world_size) {
  std::map<int64_t, std::optional<int64_t>> last_step;
  int64_t furthest = kJoinedStep;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    last_step[rank] = read_int64_key(store, progress_key(rank));
    if (last_step[rank]) furthest = std::max(furthest, *last_step[rank]);
  }
  std::vector<std::string> missing;
  for (const auto& [rank, step] : last_step) {
    if (!step) {
      missing.push_back(fmt::format("rank {} (never joined)", rank));
    } else if (*step < furthest) {
      missing.push_back(*step == kJoinedStep
                            ? fmt::format("rank {} (joined, never started a step)", rank)
                            : fmt::format("rank {} (last seen at step {})", rank, *step));
    }
  }
  if (missing.empty()) return "";
  return fmt::format("missing: {}; it died, hung or was never started. ", fmt::join(missing, ", "));
}

// describe_stragglers reads the store, whose host (process 0) may be stopped: a read from a
// stopped server blocks for ever (c10d's TCPStore::check has no timeout). It runs on a thread of
// its own, and its answer is awaited for the run's timeout at most.
std::string describe_stragglers_within(const c10::intrusive_ptr<c10d::Store>& store,
                                       int64_t world_size, double timeout_seconds) {
  auto answer = std::make_shared<std::promise<std::string>>();
  std::future<std::string> future = answer->get_future();
  std::thread([store, world_size, answer] {
    answer->set_value(describe_stragglers(*store, world_size));
  }).detach();
  if (future.wait_for(std::chrono::duration<double>(timeout_seconds)) ==
      std::future_status::ready) {
    return future.get();
  }
  return fmt::format(
      "the rendezvous store (served by the process of rank 0) did not answer within {} s: that "
      "process is stopped or hung. ",
      timeout_seconds);
}

std::string describe_failures(const std::vector<RankFailure>& failures,
                              const c10::intrusive_ptr<c10d::Store>& store,
                              const RankAddresses& addresses, int64_t world_size,
                              double timeout_seconds) {
  std::vector<std::string> causes;
  std::vector<int64_t> waiting;
  for (const auto& failure : failures) {
    if (failure.caused_by_peer) {
      waiting.push_back(failure.rank);
    } else if (std::find(causes.begin(), causes.end(), failure.message) == causes.end()) {
      causes.push_back(failure.message);
    }
  }
  std::string text;
  if (!causes.empty()) {
    text = fmt::format("{}. ", fmt::join(causes, "; "));
  } else if (const std::string lost = describe_lost_ranks(addresses.by_rank); !lost.empty()) {
    text = fmt::format("lost: {}; its process died or was stopped. ", lost);
  } else {
    text = describe_stragglers_within(store, world_size, timeout_seconds);
  }
  if (!waiting.empty()) {
    const auto& first = *std::find_if(failures.begin(), failures.end(),
                                      [](const RankFailure& f) { return f.caused_by_peer; });
    text += fmt::format(
        "Rank(s) {} could not go on without it (their collectives failed or timed out; "
        "timeout {} s); first such error: {}",
        fmt::join(waiting, ", "), timeout_seconds, first.message);
  }
  return text;
}

// Gives each rank thread its store handle. A TCPStore client is one socket whose blocking
// waits cannot be shared between threads, so every rank gets a connection of its own.
using StoreForRank = std::function<c10::intrusive_ptr<c10d::Store>(int64_t rank)>;

// Runs ranks [first_rank, first_rank + count) as threads; returns rank 0's summary if hosted.
// `store` is this process's own handle, read to diagnose failures.
std::optional<ProducerSummary> run_rank_threads(const CaseSpec& spec, const DdpOptions& options,
                                           const c10::intrusive_ptr<c10d::Store>& store,
                                           const StoreForRank& store_for_rank, int64_t first_rank,
                                           int64_t count, RunDirWriter* writer,
                                           const NamedTensors* init, Clock::time_point run_start,
                                           const std::string& rendezvous = "") {
  const TrainingData data = load_training_data(spec);
  MemoryMeter::install(spec.parallel.replicas);
  // One intra-op thread per rank: results cannot depend on thread counts, and the ranks
  // already occupy the cores. at::set_num_threads does not reach the BLAS under Debian's
  // LibTorch: its matmuls call libblas.so.3, which is OpenBLAS (openblas-pthread) with a thread
  // pool of its own, sized by OPENBLAS_NUM_THREADS / OMP_NUM_THREADS or the core count. Left
  // alone, a run's bits would depend on the machine's core count (seen: step-0 grad norm
  // 0.4995317196546782 with OMP_NUM_THREADS=1, ...32889784 with 2 threads).
  at::set_num_threads(1);
  openblas_set_num_threads(1);

  std::mutex mutex;
  RankAddresses addresses;
  std::vector<RankFailure> failures;
  std::optional<ProducerSummary> summary;
  std::vector<std::thread> threads;
  for (int64_t rank = first_rank; rank < first_rank + count; ++rank) {
    threads.emplace_back([&, rank] {
      RankContext context;
      context.spec = &spec;
      context.options = &options;
      context.data = &data;
      context.rank = rank;
      context.world_size = spec.parallel.replicas;
      context.addresses = &addresses;
      context.rendezvous = rendezvous;
      try {
        context.store = store_for_rank(rank);
      } catch (const std::exception& error) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(
            {rank,
             fmt::format("rank {}: could not reach the rendezvous store: {}", rank, error.what()),
             false});
        return;
      }
      context.run_start = run_start;
      if (rank == 0) {
        context.init_params = init;
        context.writer = writer;
      }
      try {
        auto result = train_rank(context);
        std::lock_guard<std::mutex> lock(mutex);
        if (result) summary = std::move(result);
      } catch (const c10::Error& error) {  // its what() carries a C++ backtrace
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back({rank, error.what_without_backtrace(), false});
      } catch (const std::exception& error) {
        bool peer = dynamic_cast<const PeerFailure*>(&error) != nullptr;
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back({rank, error.what(), peer});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (!failures.empty()) {
    std::sort(failures.begin(), failures.end(),
              [](const RankFailure& a, const RankFailure& b) { return a.rank < b.rank; });
    std::string message = describe_failures(failures, store, addresses, spec.parallel.replicas,
                                            options.timeout_seconds);
    if (writer != nullptr) writer->mark_incomplete(message);
    throw RunError("ddp run failed: " + message);
  }
  return summary;
}

ProducerSummary run_threads(const CaseSpec& spec, const DdpOptions& options,
                            Clock::time_point run_start) {
  if (options.fault && options.fault->kind == FaultInjection::Kind::kExit) {
    throw InputError(
        "--inject-fault ...:exit ends the whole process, so it needs process ranks: add "
        "--nproc N");
  }
  NamedTensors init = load_and_check_init(spec, options);
  RunDirWriter writer(options.out_dir, make_run_info(spec, 1), options.overwrite);
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(timeout_of(options));
  return *run_rank_threads(
      spec, options, store, [&store](int64_t) { return store; }, 0, spec.parallel.replicas, &writer,
      &init, run_start);
}

ProducerSummary run_process(const CaseSpec& spec, const DdpOptions& options,
                            const ProcessPlace& place, Clock::time_point run_start) {
  if (place.count < 1 || spec.parallel.replicas % place.count != 0) {
    throw InputError(fmt::format(
        "case {}: its {} replicas do not split evenly over {} processes; pick a divisor of {}",
        spec.name, spec.parallel.replicas, place.count, spec.parallel.replicas));
  }
  const int64_t ranks_per_process = spec.parallel.replicas / place.count;
  const int64_t first_rank = place.index * ranks_per_process;
  const bool hosts_rank0 = first_rank == 0;
  std::optional<NamedTensors> init;
  std::optional<RunDirWriter> writer;
  if (hosts_rank0) {
    init = load_and_check_init(spec, options);
    writer.emplace(options.out_dir,
                   make_run_info(spec, place.count),
                   options.overwrite);
  }
  // The process hosting rank 0 also hosts the store's server. Not waiting for every worker
  // lets a missing rank surface in the process group's rendezvous, where the progress keys
  // name it, instead of as an anonymous store timeout.
  auto connect = [&](bool server) -> c10::intrusive_ptr<c10d::Store> {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(place.coordinator_port);
    store_options.isServer = server;
    store_options.waitWorkers = false;
    store_options.timeout = timeout_of(options);
    return c10::make_intrusive<c10d::TCPStore>(place.coordinator_host, store_options);
  };
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = connect(hosts_rank0);
  } catch (const std::exception& error) {
    std::string message =
        fmt::format("rank {}: could not reach the rendezvous store at {}:{} within {} s: {}",
                    first_rank, place.coordinator_host, place.coordinator_port,
                    options.timeout_seconds, error.what());
    if (writer) writer->mark_incomplete(message);
    throw RunError(message);
  }
  auto summary = run_rank_threads(
      spec, options, store, [&connect](int64_t) { return connect(false); }, first_rank,
      ranks_per_process, writer ? &*writer : nullptr, init ? &*init : nullptr, run_start,
      fmt::format("{}:{}", place.coordinator_host, place.coordinator_port));
  return summary.value_or(ProducerSummary{});
}

}  // namespace

FaultInjection parse_fault_injection(const std::string& text) {
  FaultInjection fault;
  char kind[16] = {};
  long long rank = -1;
  long long step = -1;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%lld:%lld:%15[a-z]%n", &rank, &step, kind, &consumed) != 3 ||
      static_cast<size_t>(consumed) != text.size() || rank < 0 || step < 0) {
    throw InputError(fmt::format(
        "--inject-fault '{}': expected RANK:STEP:KIND with KIND one of throw, exit, nan "
        "(for example 3:10:throw)",
        text));
  }
  fault.rank = rank;
  fault.step = step;
  const std::string kind_text = kind;
  if (kind_text == "throw") {
    fault.kind = FaultInjection::Kind::kThrow;
  } else if (kind_text == "exit") {
    fault.kind = FaultInjection::Kind::kExit;
  } else if (kind_text == "nan") {
    fault.kind = FaultInjection::Kind::kNan;
  } else {
    throw InputError(fmt::format("--inject-fault '{}': unknown kind '{}'; use throw, exit or nan",
                                 text, kind_text));
  }
  return fault;
}

std::string format_fault_injection(const FaultInjection& fault) {
  const char* kind = fault.kind == FaultInjection::Kind::kThrow  ? "throw"
                     : fault.kind == FaultInjection::Kind::kExit ? "exit"
                                                                 : "nan";
  return fmt::format("{}:{}:{}", fault.rank, fault.step, kind);
}

void check_options(const CaseSpec& spec, const DdpOptions& options) {
  check_layers_trainable(spec);
  check_fault_fits(spec, options);
  if (spec.train.eps_root != 0.0) {
    throw InputError(fmt::format(
        "case {}: train.eps_root = {} has no torch.optim equivalent (torch's Adam adds eps "
        "outside the sqrt only); ddp_ref trains eps_root = 0: use --set train.eps_root=0",
        spec.name, spec.train.eps_root));
  }
  if (spec.train.clip_placement != "after_mean") {
    // DistributedDataParallel averages the gradients in backward's hooks (the c10d Reducer), so
    // the training loop's clip_grad_norm_ only ever sees the mean.
    throw InputError(fmt::format(
        "case {}: train.clip_placement = \"{}\": under DDP the gradients are averaged during "
        "backward, before the loop can clip them, so ddp_ref clips after the mean; use --set "
        "train.clip_placement=after_mean (the engine trains either)",
        spec.name, spec.train.clip_placement));
  }
  if (spec.train.eps_in_sqrt) {
    throw InputError(fmt::format(
        "case {}: train.eps_in_sqrt = true has no torch.optim equivalent (torch's {} adds eps "
        "after the square root only); ddp_ref trains eps_in_sqrt = false: use --set "
        "train.eps_in_sqrt=false, or give the engine optax's placement alone through "
        "scenario.engine_overrides",
        spec.name, spec.train.optimizer == "adagrad" ? "Adagrad" : "RMSprop"));
  }
  if (spec.model.label_smoothing > 0 && spec.model.label_smoothing_form != "uniform") {
    throw InputError(fmt::format(
        "case {}: model.label_smoothing_form = \"{}\" is the Flax examples' loss (targets "
        "eps/(C-1) off the true class, H(q) subtracted), which torch has no loss for; ddp_ref "
        "trains torch's CrossEntropyLoss(label_smoothing=eps): use --set "
        "model.label_smoothing_form=uniform (or give the form to the engine alone with "
        "scenario.engine_overrides)",
        spec.name, spec.model.label_smoothing_form));
  }
  // Not every LibTorch has every dtype's CPU kernels (1.13 has no f16 matmul): ask one small
  // matmul before any rank starts, rather than fail every rank at its first forward pass.
  const torch::ScalarType dtype = compute_dtype(spec.train.dtype);
  try {
    torch::mm(torch::ones({2, 2}, dtype), torch::ones({2, 2}, dtype));
  } catch (const c10::Error& error) {
    throw InputError(fmt::format(
        "case {}: train.dtype = \"{}\": this LibTorch ({}) cannot multiply {} matrices on the "
        "CPU ({}), so ddp_ref cannot train it here; use --set train.dtype=bf16 (or f32)",
        spec.name, spec.train.dtype, TORCH_VERSION, spec.train.dtype,
        error.what_without_backtrace()));
  }
}

ProducerSummary train(const CaseSpec& spec, const DdpOptions& options,
                      const std::optional<ProcessPlace>& place) {
  const auto run_start = Clock::now();
  check_options(spec, options);
  if (place) return run_process(spec, options, *place, run_start);
  return run_threads(spec, options, run_start);
}

}  // namespace parity::ddp_ref
