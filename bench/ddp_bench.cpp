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
// Each benchmark checks its result before it times anything and fails if it is wrong.
// OpenBLAS (shared by LibTorch and the engine) is set to one thread before any benchmark runs;
// the context and the summary name its kernel (openblas_get_corename) and OPENBLAS_CORETYPE.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <iostream>
#include <map>

#include "blas_info.h"
#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/init_params.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"
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

struct RankState {
  ddp_ref::Mlp model{nullptr};
  std::unique_ptr<ddp_ref::DistributedDataParallel> ddp;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  torch::Tensor inputs;
  torch::Tensor labels;
};

void BM_DdpTrainStep(benchmark::State& state) {
  torch::set_num_threads(1);
  const int64_t world_size = state.range(0);
  const int64_t per_rank_batch = 64;
  static const Dataset train = load_fashion_mnist("train");
  CaseSpec spec = load_case("mlp2-fmnist");
  RankPool pool(world_size);
  auto groups = make_groups(pool);
  std::vector<RankState> ranks(world_size);
  pool.run([&](int64_t rank) {
    RankState& mine = ranks[rank];
    mine.model = ddp_ref::Mlp(spec.model);
    mine.ddp =
        std::make_unique<ddp_ref::DistributedDataParallel>(mine.model->parameters(),
                                                          mine.model->buffers(), groups[rank]);
    mine.optimizer = ddp_ref::make_optimizer(spec.train, mine.model->parameters());
    auto all_inputs = torch::from_blob(const_cast<float*>(train.features.data()),
                                       {train.num_samples, train.feature_dim});
    auto all_labels = torch::from_blob(const_cast<int64_t*>(train.labels.data()),
                                       {train.num_samples}, torch::kInt64);
    mine.inputs = all_inputs.narrow(0, rank * per_rank_batch, per_rank_batch).clone();
    mine.labels = all_labels.narrow(0, rank * per_rank_batch, per_rank_batch).clone();
  });
  auto step = [&](int64_t rank) {
    RankState& mine = ranks[rank];
    mine.optimizer->zero_grad();
    mine.ddp->before_forward(true);
    auto loss = ddp_ref::compute_loss(spec.model, mine.model->forward(mine.inputs), mine.labels);
    mine.ddp->after_forward(true);
    loss.backward();
    mine.optimizer->step();
  };

  // Correctness first: after a step on different data, every replica holds rank 0's values.
  pool.run(step);
  for (int64_t rank = 1; rank < world_size; ++rank) {
    auto mine = ranks[rank].model->parameters();
    auto first = ranks[0].model->parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      if (!torch::equal(mine[i], first[i])) {
        state.SkipWithError(fmt::format("replica {} diverged from replica 0", rank).c_str());
        return;
      }
    }
  }

  for (auto _ : state) pool.run(step);

  report_samples_per_second(state, world_size * per_rank_batch);
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

  std::map<std::string, std::map<std::string, double>> times_;
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::SpeedupReporter>(argc, argv, [] {
    parity::bench::use_single_threaded_blas();
    parity::bench::add_blas_context();
  });
}
