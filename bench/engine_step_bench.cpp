// The mlp2-fmnist train step on one device (global batch 512: x [512, 784], labels [512]):
//   EngineTrainStep   pmap_engine's jitted step (forward, value_and_grad, optax Adam)
//   TorchEagerStep    LibTorch eager on the same shapes (Linear layers, cross_entropy,
//                     torch::optim::Adam), one intra-op thread like the engine
// Both start from the same parameters and batch and are checked to produce the same first
// loss before they are timed. The suite prints engine time / LibTorch time at the end.
// The same pair for the layer models, cnn-fmnist and vit-fmnist, on 32 images (one device's
// share of their 8 x 32 steps): EngineLayerStep/<case> and TorchLayerStep/<case>.
//
// And the GEMM FLOP rate of those steps (issue 4): every dot_general of the traced step, at
// batch 64 (one device of the 8-device pmap step) and 512 (this one-device step), from the
// program itself (forward x @ W, backward dW and dx as the VJP traces them):
//   EngineGemm/<shape>   the engine's dot_general kernel as the executor runs it (output
//                        storage from a buffer pool, then the library the kernel picks for the
//                        shape and CPU: oneDNN's matmul or OpenBLAS's sgemm, ops/dot_kernel.h)
//   OpenBlasGemm/<shape> cblas_sgemm called directly on the same operands and transposes
// Each shape is checked first: the two results must agree within what two f32 summations of K
// products may differ by (the table says whether bit for bit). Counter GFLOPs = 2*M*N*K / time.
// OpenBLAS runs single-threaded, as the engine sets it; the context and the summary name the
// kernel that ran (openblas_get_corename) and OPENBLAS_CORETYPE.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "blas_info.h"
#include "case_model.h"
#include "ir/primitive.h"
#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/init_params.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "runtime/buffer_pool.h"
#include "layer_step.h"
#include "runtime/program_cache.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace pe = pmap_engine;

// The mlp2-fmnist step's batch: 512 samples.
const CaseBatch& batch() { return case_batch("mlp2-fmnist", 1, 512); }

void BM_EngineTrainStep(benchmark::State& state) {
  const CaseBatch& b = batch();
  pe::Jitted step = engine_trainer::make_train_step(b.spec);
  pe::Tree params = engine_trainer::params_from_tensors(b.init);
  pe::Tree opt_state = engine_trainer::make_optimizer(b.spec.train).init(params);
  pe::Array x = pe::Array::from_floats({b.size(), 784}, b.x);
  pe::Array y = pe::Array::from_ints({b.size()}, b.labels32);
  pe::Tree out = step({params, opt_state, x, y});
  state.counters["first_loss"] = out[2].leaf().item();
  for (auto _ : state) {
    out = step({out[0], out[1], x, y});
  }
  state.counters["samples_per_second"] = benchmark::Counter(
      static_cast<double>(b.size() * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineTrainStep)->UseRealTime()->Unit(benchmark::kMillisecond);

// LibTorch eager train steps of `model` (an Mlp holder or a CaseModelImpl pointer, both shared
// handles) on `size`
// rows of `x` with `labels`: zero_grad, forward, the case's loss, backward, the optimizer's
// step, one intra-op thread; the first loss goes into the counters.
template <typename Model>
void time_torch_steps(benchmark::State& state, Model model, const CaseSpec& spec,
                      const std::vector<float>& x_values, const std::vector<int64_t>& labels,
                      int64_t size) {
  torch::set_num_threads(1);
  auto optimizer = ddp_ref::make_optimizer(spec.train, model->parameters());
  auto x = torch::from_blob(const_cast<float*>(x_values.data()), {size, 784}).clone();
  auto y = torch::from_blob(const_cast<int64_t*>(labels.data()), {size}, torch::kInt64).clone();
  auto step = [&] {
    optimizer->zero_grad();
    torch::Tensor loss = ddp_ref::compute_loss(spec.model, model->forward(x), y);
    loss.backward();
    optimizer->step();
    return loss.item<double>();
  };
  state.counters["first_loss"] = step();
  for (auto _ : state) step();
  state.counters["samples_per_second"] = benchmark::Counter(
      static_cast<double>(size * state.iterations()), benchmark::Counter::kIsRate);
}

void BM_TorchEagerStep(benchmark::State& state) {
  const CaseBatch& b = batch();
  ddp_ref::Mlp model(b.spec.model);
  ddp_ref::load_canonical_params(*model, b.init, "init");
  time_torch_steps(state, model, b.spec, b.x, b.labels64, b.size());
}
BENCHMARK(BM_TorchEagerStep)->UseRealTime()->Unit(benchmark::kMillisecond);


// --- the layer models: cnn-fmnist (convolutions, BatchNorm) and vit-fmnist (attention) ---
// One device's share of their 8 x 32 steps: 32 images, one device, one thread each. The engine
// runs the trainer's mapped step on one device (BatchNorm's statistics in and out); LibTorch
// runs ddp_ref's model of the case in train mode. Both start from the case's initial parameters
// (flax's initialisation) and the same images, and must agree on the first loss.

// One device's share of their 8 x 32 steps.
const CaseBatch& layer_batch(const std::string& case_name) { return case_batch(case_name, 1, 32); }

void BM_EngineLayerStep(benchmark::State& state, const std::string& case_name) {
  const CaseBatch& b = layer_batch(case_name);
  EngineLayerStep step(b);
  state.counters["first_loss"] = step.run();
  for (auto _ : state) step.run();
  state.counters["samples_per_second"] = benchmark::Counter(
      static_cast<double>(b.size() * state.iterations()), benchmark::Counter::kIsRate);
}

void BM_TorchLayerStep(benchmark::State& state, const std::string& case_name) {
  const CaseBatch& b = layer_batch(case_name);
  const std::shared_ptr<ddp_ref::CaseModelImpl> model = ddp_ref::make_case_model(b.spec.model);
  ddp_ref::load_canonical_params(*model, b.init, "init");
  model->train();
  time_torch_steps(state, model, b.spec, b.x, b.labels64, b.size());
}

const std::vector<std::string> kLayerCases = {"cnn-fmnist", "vit-fmnist"};

void register_layer_benchmarks() {
  for (const std::string& name : kLayerCases) {
    benchmark::RegisterBenchmark(("BM_EngineLayerStep/" + name).c_str(), BM_EngineLayerStep, name)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_TorchLayerStep/" + name).c_str(), BM_TorchLayerStep, name)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// --- GEMM FLOP rate ---

// One dot_general of the traced step, as the engine's direct-gemm path runs it: out[m, n] =
// op(lhs) @ op(rhs), lhs [m, k] or (trans_a) [k, m], rhs [k, n] or (trans_b) [n, k].
struct GemmCase {
  std::string name;  // "b64/2: 784x256x64 TN" (batch/position: M x N x K, op(lhs) op(rhs))
  pe::Shape lhs;
  pe::Shape rhs;
  pe::ir::Params params;
  bool trans_a = false;
  bool trans_b = false;
  int m = 0;
  int n = 0;
  int k = 0;
  double flops() const { return 2.0 * m * n * k; }
};

// The dot_generals of the mlp2-fmnist step traced at `batch` samples.
std::vector<GemmCase> step_gemms(int64_t batch) {
  CaseSpec spec = load_case("mlp2-fmnist", {"parallel.replicas=1",
                                            "data.per_replica_batch=" + std::to_string(batch)});
  const int64_t features = spec.model.widths.front();
  pe::Jitted step = engine_trainer::make_train_step(spec);
  pe::Tree params = engine_trainer::params_from_tensors(
      init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
  pe::Tree opt_state = engine_trainer::make_optimizer(spec.train).init(params);
  pe::Array x = pe::Array::from_floats(
      {batch, features}, std::vector<float>(static_cast<size_t>(batch * features), 0.0f));
  pe::Array y = pe::Array::from_ints({batch}, std::vector<int32_t>(static_cast<size_t>(batch), 0));
  // The jitted step inlines into this trace, so its program is the step's program.
  pe::runtime::TracedFunction traced = pe::runtime::trace_function(
      [&](const std::vector<pe::Tree>& args) { return step(args); }, {params, opt_state, x, y},
      {}, [](size_t, size_t, const pe::Array& leaf) { return leaf.shape(); }, "gemm shapes");
  std::vector<GemmCase> cases;
  for (const auto& equation : traced.program.equations) {
    if (equation.primitive->name != "dot_general") continue;
    GemmCase g;
    g.lhs = traced.program.vars[static_cast<size_t>(equation.inputs[0])].shape;
    g.rhs = traced.program.vars[static_cast<size_t>(equation.inputs[1])].shape;
    g.params = equation.params;
    const auto lhs_contracting = equation.params.ints("lhs_contracting");
    const auto rhs_contracting = equation.params.ints("rhs_contracting");
    if (g.lhs.size() != 2 || g.rhs.size() != 2 || lhs_contracting.size() != 1 ||
        rhs_contracting.size() != 1 || !equation.params.ints("lhs_batch").empty()) {
      std::cerr << "gemm shapes: skipping a dot_general that is not a plain matrix product\n";
      continue;
    }
    g.trans_a = lhs_contracting[0] == 0;
    g.trans_b = rhs_contracting[0] == 1;
    g.m = static_cast<int>(g.lhs[g.trans_a ? 1 : 0]);
    g.k = static_cast<int>(g.lhs[g.trans_a ? 0 : 1]);
    g.n = static_cast<int>(g.rhs[g.trans_b ? 0 : 1]);
    g.name = "b" + std::to_string(batch) + "/" + std::to_string(cases.size()) + ": " +
             std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) + " " +
             (g.trans_a ? "T" : "N") + (g.trans_b ? "T" : "N");
    cases.push_back(std::move(g));
  }
  return cases;
}

pe::Buffer random_matrix(const pe::Shape& shape, uint32_t seed) {
  pe::Buffer buffer = pe::Buffer::allocate(pe::DType::f32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* values = buffer.data<float>();
  for (size_t i = 0; i < buffer.num_elements(); ++i) values[i] = uniform(rng);
  return buffer;
}

void report_gflops(benchmark::State& state, const GemmCase& g) {
  state.counters["GFLOPs"] =
      benchmark::Counter(g.flops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// sum_k |op(a)[i, k] * op(b)[k, j]| for every output element (i, j), in f64.
std::vector<double> product_magnitudes(const GemmCase& g, const pe::Buffer& a, const pe::Buffer& b) {
  const float* lhs = a.data<float>();
  const float* rhs = b.data<float>();
  std::vector<double> sums(static_cast<size_t>(g.m) * static_cast<size_t>(g.n), 0.0);
  for (int i = 0; i < g.m; ++i) {
    for (int kk = 0; kk < g.k; ++kk) {
      const double left = std::abs(lhs[g.trans_a ? kk * g.m + i : i * g.k + kk]);
      for (int j = 0; j < g.n; ++j) {
        sums[static_cast<size_t>(i) * g.n + j] +=
            left * std::abs(rhs[g.trans_b ? j * g.k + kk : kk * g.n + j]);
      }
    }
  }
  return sums;
}

void BM_EngineGemm(benchmark::State& state, const GemmCase& g) {
  const pe::ir::Primitive& dot = pe::ir::find_primitive("dot_general");
  const pe::Buffer a = random_matrix(g.lhs, 1);
  const pe::Buffer b = random_matrix(g.rhs, 2);
  const std::vector<const pe::Buffer*> operands = {&a, &b};
  // As the executor runs a kernel: allocations come from the device's pool, and a dead result
  // goes back to it.
  pe::runtime::BufferPool pool;
  pe::runtime::BufferPool::Active active(pool);

  // Correctness first: the same product as cblas_sgemm's, within what two f32 summations of K
  // products may differ by (the engine's f32 products may run on oneDNN, which sums in another
  // order): each is within gamma_K * sum |a * b| of the exact value, gamma_K = K u / (1 - K u),
  // u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, (3.5)), so they are
  // within twice that of each other.
  std::vector<pe::Buffer> out = dot.kernel(operands, g.params);
  std::vector<float> expected(static_cast<size_t>(g.m) * static_cast<size_t>(g.n));
  reference_sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, a.data<float>(), b.data<float>(),
                  expected.data());
  if (out.at(0).num_elements() != expected.size()) {
    state.SkipWithError("engine result has the wrong size");
    return;
  }
  const float* got = out[0].data<float>();
  const std::vector<double> magnitudes = product_magnitudes(g, a, b);
  const double unit = std::ldexp(1.0, -24);
  const double gamma = g.k * unit / (1 - g.k * unit);
  double worst = 0;  // the largest difference as a share of its bound
  for (size_t i = 0; i < expected.size(); ++i) {
    const double bound = 2 * gamma * magnitudes[i];
    const double difference = std::abs(static_cast<double>(got[i]) - expected[i]);
    worst = std::max(worst, bound > 0 ? difference / bound : (difference > 0 ? 2.0 : 0.0));
  }
  const bool bitwise =
      std::memcmp(got, expected.data(), expected.size() * sizeof(float)) == 0;
  state.counters["bitwise_equal"] = bitwise ? 1 : 0;
  state.counters["share_of_bound"] = worst;
  if (worst > 1) {
    state.SkipWithError("engine dot_general and cblas_sgemm differ by more than f32 summation allows");
    return;
  }
  pool.give(std::move(out[0].bytes), false);

  for (auto _ : state) {
    std::vector<pe::Buffer> result = dot.kernel(operands, g.params);
    benchmark::DoNotOptimize(result[0].bytes->data());
    pool.give(std::move(result[0].bytes), false);
  }
  report_gflops(state, g);
}

void BM_OpenBlasGemm(benchmark::State& state, const GemmCase& g) {
  const pe::Buffer a = random_matrix(g.lhs, 1);
  const pe::Buffer b = random_matrix(g.rhs, 2);
  std::vector<float> c(static_cast<size_t>(g.m) * static_cast<size_t>(g.n));
  for (auto _ : state) {
    reference_sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, a.data<float>(), b.data<float>(),
                    c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  report_gflops(state, g);
}

std::vector<GemmCase>& gemm_cases() {
  static std::vector<GemmCase> cases;
  return cases;
}

// Registers the layer models' steps, and traces the MLP step at both batch sizes to register one
// engine and one OpenBLAS benchmark per dot_general; also fixes OpenBLAS at one thread and
// records which kernel it runs.
void register_benchmarks() {
  use_single_threaded_blas();
  add_blas_context();
  register_layer_benchmarks();
  for (int64_t batch : {64, 512}) {
    for (GemmCase& g : step_gemms(batch)) gemm_cases().push_back(std::move(g));
  }
  for (const GemmCase& g : gemm_cases()) {
    benchmark::RegisterBenchmark(("BM_EngineGemm/" + g.name).c_str(), BM_EngineGemm, g)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_OpenBlasGemm/" + g.name).c_str(), BM_OpenBlasGemm, g)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

// Keeps each run's time per iteration and first loss, to print the ratio and check agreement;
// and the GEMM runs, to print engine vs OpenBLAS GFLOP/s per shape.
class RatioReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      failed_ = failed_ || run.error_occurred;
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      const std::string& name = run.run_name.function_name;
      seconds_[name] = run.real_accumulated_time / static_cast<double>(run.iterations);
      auto loss = run.counters.find("first_loss");
      if (loss != run.counters.end()) first_loss_[name] = loss->second;
      auto bitwise = run.counters.find("bitwise_equal");
      if (bitwise != run.counters.end()) bitwise_[name] = bitwise->second != 0;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  int finish() {
    int status = failed_ ? 1 : 0;
    print_gemms();
    auto engine = seconds_.find("BM_EngineTrainStep");
    auto torch = seconds_.find("BM_TorchEagerStep");
    if (engine != seconds_.end() && torch != seconds_.end()) {
      const double engine_loss = first_loss_.at("BM_EngineTrainStep");
      const double torch_loss = first_loss_.at("BM_TorchEagerStep");
      std::cout << fmt::format(
          "engine / LibTorch eager step time: {:.2f} (engine {:.2f} ms, LibTorch {:.2f} ms); "
          "first loss {:.6f} vs {:.6f}\n",
          engine->second / torch->second, engine->second * 1e3, torch->second * 1e3, engine_loss,
          torch_loss);
      if (std::abs(engine_loss - torch_loss) > 1e-5 * std::abs(torch_loss)) {
        std::cout << "FAILED: the two steps computed different losses; the timing compares "
                     "different work\n";
        status = 1;
      }
      const double ratio = engine->second / torch->second;
      targets_.add({"engine step / LibTorch eager step, mlp2-fmnist, 1 device", ratio, "<= 1.0",
                    ratio <= 1.0,
                    fmt::format("engine {:.2f} ms, LibTorch {:.2f} ms", engine->second * 1e3,
                                torch->second * 1e3)});
      add_flop_rate(engine->second);
    }
    status = add_layer_ratios() ? status : 1;
    std::cout << blas_summary_line() << "\n";
    if (failed_) std::cout << "FAILED: a benchmark failed its correctness check (see above)\n";
    return status;
  }

 private:
  void print_gemms() const {
    bool header = false;
    for (const GemmCase& g : gemm_cases()) {
      auto engine = seconds_.find("BM_EngineGemm/" + g.name);
      auto blas = seconds_.find("BM_OpenBlasGemm/" + g.name);
      if (engine == seconds_.end() || blas == seconds_.end()) continue;
      if (!header) {
        std::cout << "\nGEMM of the mlp2-fmnist step (MxNxK, op(A) op(B)): engine dot_general vs "
                     "cblas_sgemm, one thread\n"
                  << fmt::format("{:<22} {:>12} {:>12} {:>13} {:>8}\n", "batch/dot: shape",
                                 "engine GF/s", "OpenBLAS GF/s", "engine/BLAS", "bitwise");
        header = true;
      }
      auto bitwise = bitwise_.find("BM_EngineGemm/" + g.name);
      std::cout << fmt::format(
          "{:<22} {:>12.2f} {:>12.2f} {:>13.2f} {:>8}\n", g.name, g.flops() / engine->second / 1e9,
          g.flops() / blas->second / 1e9, blas->second / engine->second,
          bitwise == bitwise_.end() ? "?" : (bitwise->second ? "yes" : "no"));
    }
  }

  // engine / LibTorch per layer model; false when a pair computed different first losses.
  bool add_layer_ratios() {
    bool agreed = true;
    for (const std::string& name : kLayerCases) {
      auto engine = seconds_.find("BM_EngineLayerStep/" + name);
      auto torch = seconds_.find("BM_TorchLayerStep/" + name);
      if (engine == seconds_.end() || torch == seconds_.end()) continue;
      const double engine_loss = first_loss_.at(engine->first);
      const double torch_loss = first_loss_.at(torch->first);
      if (std::abs(engine_loss - torch_loss) > 1e-4 * std::abs(torch_loss)) {
        std::cout << fmt::format("FAILED: {}: first losses {:.6f} (engine) and {:.6f} (LibTorch) "
                                 "differ; the timing compares different work\n",
                                 name, engine_loss, torch_loss);
        agreed = false;
      }
      const double ratio = engine->second / torch->second;
      targets_.add({"engine step / LibTorch eager step, " + name + ", 1 device x 32", ratio,
                    "<= 1.0", ratio <= 1.0,
                    fmt::format("engine {:.1f} ms, LibTorch {:.1f} ms; first loss {:.6f} vs {:.6f}",
                                engine->second * 1e3, torch->second * 1e3, engine_loss,
                                torch_loss)});
    }
    return agreed;
  }

  // The roofline: the step's GEMM FLOPs (its dot_generals at batch 512) over the step's time,
  // against cblas_sgemm's rate on the same shapes (the sum of their times alone).
  void add_flop_rate(double step_seconds) {
    double flops = 0;
    double sgemm_seconds = 0;
    for (const GemmCase& g : gemm_cases()) {
      if (g.name.rfind("b512/", 0) != 0) continue;
      auto blas = seconds_.find("BM_OpenBlasGemm/" + g.name);
      if (blas == seconds_.end()) return;  // filtered out: no roofline in this run
      flops += g.flops();
      sgemm_seconds += blas->second;
    }
    if (flops == 0) return;
    const double ratio = sgemm_seconds / step_seconds;
    targets_.add({"step FLOP rate / cblas_sgemm's on the step's GEMM shapes", ratio, ">= 0.6",
                  ratio >= 0.6,
                  fmt::format("{:.0f} MFLOP per step: {:.1f} GFLOP/s in the step, {:.1f} in "
                              "sgemm alone ({:.2f} ms)",
                              flops / 1e6, flops / step_seconds / 1e9, flops / sgemm_seconds / 1e9,
                              sgemm_seconds * 1e3)});
  }

  std::map<std::string, double> seconds_;
  std::map<std::string, double> first_loss_;
  std::map<std::string, bool> bitwise_;
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::RatioReporter>(
      argc, argv, parity::bench::register_benchmarks);
}
