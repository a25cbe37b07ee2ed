// The mlp2-fmnist train step on one device (global batch 512: x [512, 784], labels [512]):
//   EngineTrainStep   pmap_engine's jitted step (forward, value_and_grad, optax Adam)
//   TorchEagerStep    LibTorch eager on the same shapes (Linear layers, cross_entropy,
//                     torch::optim::Adam), one intra-op thread like the engine
// Both start from the same parameters and batch and are checked to produce the same first
// loss before they are timed. The suite prints engine time / LibTorch time at the end.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <iostream>
#include <map>

#include "mlp_program.h"
#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/init_params.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace pe = pmap_engine;

struct Batch {
  CaseSpec spec;
  NamedTensors init;
  std::vector<float> x;
  std::vector<int32_t> labels32;
  std::vector<int64_t> labels64;
  int64_t size = 512;
};

const Batch& batch() {
  static const Batch shared = [] {
    Batch b;
    b.spec = load_case("mlp2-fmnist", {"parallel.replicas=1", "data.per_replica_batch=512"});
    b.init = init_mlp_params(b.spec.model.widths, b.spec.init.seed, b.spec.init.scale);
    Dataset train = load_fashion_mnist("train");
    b.x.assign(train.features.begin(), train.features.begin() + b.size * train.feature_dim);
    b.labels64.assign(train.labels.begin(), train.labels.begin() + b.size);
    b.labels32.assign(b.labels64.begin(), b.labels64.end());
    return b;
  }();
  return shared;
}

void BM_EngineTrainStep(benchmark::State& state) {
  const Batch& b = batch();
  pe::Jitted step = cases::make_train_step(b.spec);
  pe::Tree params = cases::params_from_tensors(b.init);
  pe::Tree opt_state = cases::make_optimizer(b.spec.train).init(params);
  pe::Array x = pe::Array::from_floats({b.size, 784}, b.x);
  pe::Array y = pe::Array::from_ints({b.size}, b.labels32);
  pe::Tree out = step({params, opt_state, x, y});
  state.counters["first_loss"] = out[2].leaf().item();
  for (auto _ : state) {
    out = step({out[0], out[1], x, y});
  }
  state.counters["samples_per_second"] = benchmark::Counter(
      static_cast<double>(b.size * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineTrainStep)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_TorchEagerStep(benchmark::State& state) {
  torch::set_num_threads(1);
  const Batch& b = batch();
  ddp_ref::Mlp model(b.spec.model);
  ddp_ref::load_canonical_params(model, b.init, "init");
  auto optimizer = ddp_ref::make_optimizer(b.spec.train, model->parameters());
  auto x = torch::from_blob(const_cast<float*>(b.x.data()), {b.size, 784}).clone();
  auto y =
      torch::from_blob(const_cast<int64_t*>(b.labels64.data()), {b.size}, torch::kInt64).clone();
  auto step = [&] {
    optimizer->zero_grad();
    auto loss = ddp_ref::compute_loss(b.spec.model, model->forward(x), y);
    loss.backward();
    optimizer->step();
    return loss.item<double>();
  };
  state.counters["first_loss"] = step();
  for (auto _ : state) step();
  state.counters["samples_per_second"] = benchmark::Counter(
      static_cast<double>(b.size * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TorchEagerStep)->UseRealTime()->Unit(benchmark::kMillisecond);

// Keeps each run's time per iteration and first loss, to print the ratio and check agreement.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      seconds_[run.run_name.function_name] = run.GetAdjustedRealTime();
      auto loss = run.counters.find("first_loss");
      if (loss != run.counters.end()) first_loss_[run.run_name.function_name] = loss->second;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  int finish() const {
    auto engine = seconds_.find("BM_EngineTrainStep");
    auto torch = seconds_.find("BM_TorchEagerStep");
    if (engine == seconds_.end() || torch == seconds_.end()) return 0;
    const double engine_loss = first_loss_.at("BM_EngineTrainStep");
    const double torch_loss = first_loss_.at("BM_TorchEagerStep");
    std::cout << fmt::format(
        "engine / LibTorch eager step time: {:.2f} (engine {:.2f} ms, LibTorch {:.2f} ms); "
        "first loss {:.6f} vs {:.6f}\n",
        engine->second / torch->second, engine->second, torch->second, engine_loss, torch_loss);
    if (std::abs(engine_loss - torch_loss) > 1e-5 * std::abs(torch_loss)) {
      std::cout << "FAILED: the two steps computed different losses; the timing compares "
                   "different work\n";
      return 1;
    }
    return 0;
  }

 private:
  std::map<std::string, double> seconds_;
  std::map<std::string, double> first_loss_;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::RatioReporter>(argc, argv);
}
