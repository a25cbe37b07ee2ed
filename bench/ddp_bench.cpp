// ddp_ref's speed, as Google Benchmark suites (ranks are threads of this process):
//   GlooAllReduce/W/N  the all-reduce DDP's Reducer issues, through c10d::ProcessGroupGloo, of
//                      N float32 elements over W ranks. Counters as nccl-tests reports them:
//                      algbw = bytes / time, busbw = algbw * 2(W-1)/W (doc/PERFORMANCE.md).
//   DdpTrainStep/W     one full DDP step of the mlp2-fmnist model (forward, backward with the
//                      Reducer's bucketed all-reduce, Adam) on W ranks x 64 real Fashion-MNIST
//                      samples; counter samples_per_second over the global batch.
// Each benchmark checks its result before it times anything and fails if it is wrong.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "process_group.h"
#include "rank_pool.h"

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
        std::make_unique<ddp_ref::DistributedDataParallel>(mine.model->parameters(), groups[rank]);
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

  state.counters["samples_per_second"] =
      benchmark::Counter(static_cast<double>(world_size * per_rank_batch * state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DdpTrainStep)
    ->ArgName("ranks")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parity::bench

BENCHMARK_MAIN();
