// ddp_ref's speed, as Google Benchmark suites (ranks are threads of this process):
//   GlooAllReduce/W/N  the all-reduce DDP's Reducer issues, through c10d::ProcessGroupGloo, of
//                      N float32 elements over W ranks. Counters as nccl-tests reports them:
//                      algbw = bytes / time, busbw = algbw * 2(W-1)/W (doc/PERFORMANCE.md).
//   DdpTrainStep/W     one full DDP step of the mlp2-fmnist model (forward, backward with the
//                      Reducer's bucketed all-reduce, Adam) on W ranks x 64 real Fashion-MNIST
//                      samples; counter samples_per_second over the global batch.
//   EnginePmapStep/W   the same step with pmap_engine: pmap over W devices, pmean of the
//                      gradients, optax Adam, on the same samples per device. The suite ends
//                      with a table of DDP time / engine time per W.
//   DdpLayerStep/<case>, EngineLayerPmapStep/<case>
//                      the same pair for the layers cases cnn-fmnist and vit-fmnist at their
//                      own scale, 8 ranks (devices) x 32 images.
// Each benchmark checks its result before it times anything and fails if it is wrong.
// OpenBLAS (shared by LibTorch and the engine) is set to one thread before any benchmark runs;
// the context and the summary name its kernel (openblas_get_corename) and OPENBLAS_CORETYPE.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <tuple>

#include "blas_info.h"
#include "case_model.h"
#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/init_params.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"
#include "layer_step.h"
#include "process_group.h"
#include "rank_pool.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

using ddp_ref::make_gloo_group;
constexpr std::chrono::milliseconds kTimeout{60000};

std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>> make_groups(RankPool& pool) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>> groups(pool.world_size());
  pool.run([&](int64_t rank) {
    groups[rank] = make_gloo_group(store, rank, pool.world_size(), kTimeout);
  });
  return groups;
}

void BM_GlooAllReduce(benchmark::State& state) {
  torch::set_num_threads(1);
  const int64_t world_size = state.range(0);
  const int64_t num_elements = state.range(1);
  RankPool pool(world_size);
  auto groups = make_groups(pool);
  std::vector<torch::Tensor> buffers(world_size);
  auto all_reduce = [&](int64_t rank) {
    std::vector<torch::Tensor> tensors = {buffers[rank]};
    groups[rank]->allreduce(tensors)->wait();
  };

  // Correctness first: every rank contributes its rank; the sum is exact in float32.
  for (int64_t rank = 0; rank < world_size; ++rank) {
    buffers[rank] = torch::full({num_elements}, static_cast<float>(rank));
  }
  pool.run(all_reduce);
  const float expected = static_cast<float>(world_size * (world_size - 1) / 2);
  for (int64_t rank = 0; rank < world_size; ++rank) {
    if (!buffers[rank].eq(expected).all().item<bool>()) {
      state.SkipWithError(fmt::format("rank {} holds a wrong sum", rank).c_str());
      return;
    }
    buffers[rank].zero_();  // zeros stay zeros: no overflow however long it runs
  }

  for (auto _ : state) pool.run(all_reduce);

  const double num_bytes = static_cast<double>(num_elements) * sizeof(float);
  const double iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(num_bytes * iterations));
  state.counters["algbw_GBps"] =
      benchmark::Counter(num_bytes * iterations / 1e9, benchmark::Counter::kIsRate);
  state.counters["busbw_GBps"] =
      benchmark::Counter(num_bytes * iterations / 1e9 * 2.0 * (world_size - 1) / world_size,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GlooAllReduce)
    ->ArgNames({"ranks", "elements"})
    ->ArgsProduct({{2, 4, 8}, {1 << 10, 203530, 1 << 20}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The train-step benchmarks run 1, 2, 4 and 8 ranks (devices), timed in wall-clock ms.
void sweep_ranks(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgName("ranks")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseRealTime()->Unit(
      benchmark::kMillisecond);
}

void report_samples_per_second(benchmark::State& state, int64_t samples_per_step) {
  state.counters["samples_per_second"] = benchmark::Counter(
      static_cast<double>(samples_per_step * state.iterations()), benchmark::Counter::kIsRate);
}

// One rank's DDP state: its model (an Mlp holder or a case model, both shared handles), the
// Reducer, the optimizer and its batch.
struct RankState {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::unique_ptr<ddp_ref::DistributedDataParallel> ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  torch::Tensor inputs;
  torch::Tensor labels;
};

// Times DDP train steps of `spec` on the pool's ranks, each rank's model made by `make_model`
// (which returns the module and its forward) and fed `per_rank_batch` rows of `rows`/`labels`
// at rank * per_rank_batch, as ddp_ref's launcher sets a rank up (one intra-op thread, the
// same initial parameters on every rank). Checks first that a step leaves every replica
// holding rank 0's parameters.
void time_ddp_steps(
    benchmark::State& state, const CaseSpec& spec, RankPool& pool,
    const std::function<std::pair<std::shared_ptr<torch::nn::Module>,
                                  std::function<torch::Tensor(const torch::Tensor&)>>()>&
        make_model,
    const std::vector<float>& rows, const std::vector<int64_t>& labels, int64_t per_rank_batch) {
  auto groups = make_groups(pool);
  std::vector<RankState> ranks(pool.world_size());
  pool.run([&](int64_t rank) {
    torch::set_num_threads(1);  // per thread: OpenMP keeps the team size per calling thread
    RankState& mine = ranks[rank];
    std::tie(mine.module, mine.forward) = make_model();
    mine.ddp = std::make_unique<ddp_ref::DistributedDataParallel>(
        mine.module->parameters(), mine.module->buffers(), groups[rank]);
    mine.optimizer = ddp_ref::make_optimizer(spec.train, mine.module->parameters());
    const int64_t feature_dim = static_cast<int64_t>(rows.size() / labels.size());
    auto all_inputs = torch::from_blob(const_cast<float*>(rows.data()),
                                       {static_cast<int64_t>(labels.size()), feature_dim});
    auto all_labels = torch::from_blob(const_cast<int64_t*>(labels.data()),
                                       {static_cast<int64_t>(labels.size())}, torch::kInt64);
    mine.inputs = all_inputs.narrow(0, rank * per_rank_batch, per_rank_batch).clone();
    mine.labels = all_labels.narrow(0, rank * per_rank_batch, per_rank_batch).clone();
  });
  auto step = [&](int64_t rank) {
    RankState& mine = ranks[rank];
    mine.optimizer->zero_grad();
    mine.ddp->before_forward(true);
    auto loss = ddp_ref::compute_loss(spec.model, mine.forward(mine.inputs), mine.labels);
    mine.ddp->after_forward(true);
    loss.backward();
    mine.optimizer->step();
  };

  // Correctness first: after a step on different data, every replica holds rank 0's values.
  pool.run(step);
  for (int64_t rank = 1; rank < pool.world_size(); ++rank) {
    auto mine = ranks[rank].module->parameters();
    auto first = ranks[0].module->parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      if (!torch::equal(mine[i], first[i])) {
        state.SkipWithError(fmt::format("replica {} diverged from replica 0", rank).c_str());
        return;
      }
    }
  }

  for (auto _ : state) pool.run(step);

  report_samples_per_second(state, pool.world_size() * per_rank_batch);
}

void BM_DdpTrainStep(benchmark::State& state) {
  const int64_t world_size = state.range(0);
  const int64_t per_rank_batch = 64;
  static const Dataset train = load_fashion_mnist("train");
  const CaseSpec spec = load_case("mlp2-fmnist");
  RankPool pool(world_size);
  time_ddp_steps(
      state, spec, pool,
      [&] {
        ddp_ref::Mlp model(spec.model);
        return std::make_pair(model.ptr(), std::function<torch::Tensor(const torch::Tensor&)>(
                                               [model](const torch::Tensor& x) mutable {
                                                 return model->forward(x);
                                               }));
      },
      train.features, train.labels, per_rank_batch);
}
BENCHMARK(BM_DdpTrainStep)->Apply(sweep_ranks);

void run_engine_pmap_step(benchmark::State& state, int64_t num_devices, int64_t per_device_batch) {
  namespace pe = pmap_engine;
  static const Dataset train = load_fashion_mnist("train");
  CaseSpec spec = load_case("mlp2-fmnist", {"parallel.replicas=" + std::to_string(num_devices),
                                            "data.per_replica_batch=" +
                                                std::to_string(per_device_batch)});
  // The step `parity pmap` runs (no replica check on every call, as DDP checks none); the first
  // call, the correctness check before timing, runs the same program with the replicas compared
  // bit for bit (pmap's check_replicated_outputs).
  const pe::DeviceSet devices(static_cast<int>(num_devices));
  engine_trainer::EngineStepOptions checked;
  checked.check_replicas = true;
  pe::Pmapped checked_step = engine_trainer::make_pmap_train_step(spec, devices, checked);
  pe::Pmapped step = engine_trainer::make_pmap_train_step(spec, devices, {});
  const NamedTensors init = init_mlp_params(spec.model.widths, 0, 0.01);
  pe::Tree single = engine_trainer::params_from_tensors(init);
  pe::Tree params = engine_trainer::replicate(single, num_devices);
  pe::Tree opt_state = engine_trainer::replicate(
      engine_trainer::make_optimizer(spec.train).init(single), num_devices);
  const size_t num_values = static_cast<size_t>(num_devices * per_device_batch * 784);
  std::vector<float> x(train.features.begin(), train.features.begin() + num_values);
  std::vector<int32_t> y(train.labels.begin(),
                         train.labels.begin() + num_devices * per_device_batch);
  pe::Array inputs = pe::Array::from_floats({num_devices, per_device_batch, 784}, x);
  pe::Array labels = pe::Array::from_ints({num_devices, per_device_batch}, y);
  try {
    pe::Tree out = checked_step({params, opt_state, inputs, labels});
    params = out[0];
    opt_state = out[1];
    for (auto _ : state) {
      out = step({params, opt_state, inputs, labels});
      params = out[0];
      opt_state = out[1];
    }
  } catch (const pe::EngineError& error) {
    state.SkipWithError(error.what());
    return;
  }
  report_samples_per_second(state, num_devices * per_device_batch);
}

void BM_EnginePmapStep(benchmark::State& state) { run_engine_pmap_step(state, state.range(0), 64); }
BENCHMARK(BM_EnginePmapStep)->Apply(sweep_ranks);

// The same 512 samples on one device: what the 8-device step's work costs without the split.
void BM_EngineOneDeviceStep512(benchmark::State& state) { run_engine_pmap_step(state, 1, 512); }
BENCHMARK(BM_EngineOneDeviceStep512)->UseRealTime()->Unit(benchmark::kMillisecond);

// --- the layer models at their cases' scale: 8 ranks (devices) x 32 images ---
// DDP on ddp_ref's model of the case in train mode and the engine's pmap step (layer_step.h),
// both from the case's initial parameters on the same images.
constexpr int64_t kLayerRanks = 8;
constexpr int64_t kLayerPerRank = 32;
const std::vector<std::string> kLayerCases = {"cnn-fmnist", "vit-fmnist"};

void BM_DdpLayerStep(benchmark::State& state, const std::string& case_name) {
  const CaseBatch& b = case_batch(case_name, kLayerRanks, kLayerPerRank);
  RankPool pool(kLayerRanks);
  time_ddp_steps(
      state, b.spec, pool,
      [&] {
        std::shared_ptr<ddp_ref::CaseModelImpl> model = ddp_ref::make_case_model(b.spec.model);
        ddp_ref::load_canonical_params(*model, b.init, "init");
        model->train();
        return std::make_pair(
            std::static_pointer_cast<torch::nn::Module>(model),
            std::function<torch::Tensor(const torch::Tensor&)>(
                [model](const torch::Tensor& x) { return model->forward(x); }));
      },
      b.x, b.labels64, kLayerPerRank);
}

void BM_EngineLayerPmapStep(benchmark::State& state, const std::string& case_name) {
  const CaseBatch& b = case_batch(case_name, kLayerRanks, kLayerPerRank);
  try {
    EngineLayerStep step(b);
    state.counters["first_loss"] = step.run();
    for (auto _ : state) step.run();
  } catch (const pmap_engine::EngineError& error) {
    state.SkipWithError(error.what());
    return;
  }
  report_samples_per_second(state, b.size());
}

void register_layer_benchmarks() {
  for (const std::string& name : kLayerCases) {
    for (const auto& [prefix, function] :
         {std::make_pair("BM_DdpLayerStep/", &BM_DdpLayerStep),
          std::make_pair("BM_EngineLayerPmapStep/", &BM_EngineLayerPmapStep)}) {
      benchmark::RegisterBenchmark((prefix + name).c_str(), function, name)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

// Prints DDP step time / engine step time for each rank count, and fails the suite when a
// benchmark failed its correctness check.
class SpeedupReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      failed_ = failed_ || run.error_occurred;
      times_[run.run_name.args][run.run_name.function_name] = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  int finish() {
    std::cout << "\nmlp2-fmnist step, ranks x 64 samples: DDP (c10d Reducer over Gloo) vs "
                 "pmap_engine\n";
    for (const auto& [args, by_function] : times_) {
      auto ddp = by_function.find("BM_DdpTrainStep");
      auto engine = by_function.find("BM_EnginePmapStep");
      if (ddp == by_function.end() || engine == by_function.end()) continue;
      std::cout << fmt::format("{:<10} ddp {:8.2f} ms   engine {:8.2f} ms   speedup {:.2f}x\n",
                               args, ddp->second, engine->second, ddp->second / engine->second);
      if (args == "ranks:8") {
        const double speedup = ddp->second / engine->second;
        targets_.add({"DDP step / engine pmap step, 8 x 64, mlp2-fmnist", speedup, ">= 5",
                      speedup >= 5,
                      fmt::format("DDP {:.2f} ms, engine {:.2f} ms", ddp->second, engine->second)});
      }
    }
    add_split_cost();
    add_layer_speedups();
    std::cout << blas_summary_line() << "\n";
    if (failed_) std::cout << "FAILED: a benchmark failed its correctness check (see above)\n";
    return failed_ ? 1 : 0;
  }

 private:
  // The engine's 8-device step against its one-device step on the same 512 samples.
  void add_split_cost() {
    auto eight = times_.find("ranks:8");
    auto one = times_.find("");
    if (eight == times_.end() || one == times_.end()) return;
    auto split = eight->second.find("BM_EnginePmapStep");
    auto whole = one->second.find("BM_EngineOneDeviceStep512");
    if (split == eight->second.end() || whole == one->second.end()) return;
    const double ratio = split->second / whole->second;
    targets_.add({"engine 8 devices x 64 / engine 1 device x 512, mlp2-fmnist", ratio, "<= 1.3",
                  ratio <= 1.3,
                  fmt::format("8 devices {:.2f} ms, 1 device {:.2f} ms", split->second,
                              whole->second)});
  }

  // DDP's 8 x 32 step against the engine's, per layers case: the engine at least as fast on
  // cnn-fmnist, 1.5x on vit-fmnist.
  void add_layer_speedups() {
    const std::map<std::string, double> goals = {{"cnn-fmnist", 1.0}, {"vit-fmnist", 1.5}};
    for (const auto& [name, goal] : goals) {
      auto ddp = find_time("BM_DdpLayerStep/" + name);
      auto engine = find_time("BM_EngineLayerPmapStep/" + name);
      if (!ddp || !engine) continue;
      const double speedup = *ddp / *engine;
      targets_.add({"DDP step / engine pmap step, 8 x 32, " + name, speedup,
                    fmt::format(">= {:g}", goal), speedup >= goal,
                    fmt::format("DDP {:.1f} ms, engine {:.1f} ms", *ddp, *engine)});
    }
  }

  // A benchmark without arguments: its time, if it ran.
  std::optional<double> find_time(const std::string& function_name) const {
    auto none = times_.find("");
    if (none == times_.end()) return std::nullopt;
    auto found = none->second.find(function_name);
    if (found == none->second.end()) return std::nullopt;
    return found->second;
  }

  std::map<std::string, std::map<std::string, double>> times_;
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::SpeedupReporter>(argc, argv, [] {
    parity::bench::use_single_threaded_blas();
    parity::bench::add_blas_context();
    parity::bench::register_layer_benchmarks();
  });
}
