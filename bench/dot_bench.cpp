// The engine's batched dot_general against at::matmul on vit-fmnist's attention products, one
// device's share of its step (32 images of 49 tokens, 4 heads of depth 16), one thread each
// (the engine's oneDNN and OpenBLAS calls single-threaded as it sets them,
// torch::set_num_threads(1)). The engine reads attention's [batch, length, heads, depth]
// operands as they lie (linen/attention.cpp's einsums); LibTorch gets the same memory and the
// same product through permuted views, as a PyTorch attention written with matmul would:
//   Logits          q . k over depth, batched over (batch, heads)         -> [B, H, Lq, Lk]
//   Values          weights . v over the keys                             -> [B, H, Lq, D]
//   QueryGradient   the logits' VJP for q: g . k                          -> [B, H, Lq, D]
//   KeyGradient     the logits' VJP for k: g^T . q                        -> [B, H, Lk, D]
//   WeightsGradient the values' VJP for the weights: g . v over depth     -> [B, H, Lq, Lk]
//   ValueGradient   the values' VJP for v: weights^T . g                  -> [B, H, Lk, D]
// The engine runs dot_general's kernel as the executor does (ir/primitive.h); before timing it
// checks its result against LibTorch's. LibTorch runs first for each product; the summary
// prints engine time / LibTorch time per product (medians over --benchmark_repetitions).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "blas_info.h"
#include "ir/primitive.h"
#include "pmap_engine/ops.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace pe = pmap_engine;

constexpr int64_t kBatch = 32, kLength = 49, kHeads = 4, kDepth = 16;

struct BatchedDot {
  std::string name;
  pe::Shape lhs, rhs;
  pe::ir::Params params;  // dot_general's dimension numbers
  // The same product with LibTorch, from tensors in the engine's layouts.
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> torch;
};

pe::ir::Params dims(std::vector<int64_t> lhs_contracting, std::vector<int64_t> rhs_contracting,
                    std::vector<int64_t> lhs_batch, std::vector<int64_t> rhs_batch) {
  return {{"lhs_contracting", lhs_contracting},
          {"rhs_contracting", rhs_contracting},
          {"lhs_batch", lhs_batch},
          {"rhs_batch", rhs_batch}};
}

const std::vector<BatchedDot>& products() {
  const pe::Shape tokens = {kBatch, kLength, kHeads, kDepth};   // q, k, v
  const pe::Shape scores = {kBatch, kHeads, kLength, kLength};  // logits, weights
  const pe::Shape heads = {kBatch, kHeads, kLength, kDepth};    // the values' product
  auto heads_first = [](const torch::Tensor& t) { return t.permute({0, 2, 1, 3}); };
  static const std::vector<BatchedDot> all = {
      {"Logits", tokens, tokens, dims({3}, {3}, {0, 2}, {0, 2}),
       [=](const torch::Tensor& q, const torch::Tensor& k) {
         return at::matmul(heads_first(q), k.permute({0, 2, 3, 1}));
       }},
      {"Values", scores, tokens, dims({3}, {1}, {0, 1}, {0, 2}),
       [=](const torch::Tensor& w, const torch::Tensor& v) {
         return at::matmul(w, heads_first(v));
       }},
      {"QueryGradient", scores, tokens, dims({3}, {1}, {0, 1}, {0, 2}),
       [=](const torch::Tensor& g, const torch::Tensor& k) {
         return at::matmul(g, heads_first(k));
       }},
      {"KeyGradient", scores, tokens, dims({2}, {1}, {0, 1}, {0, 2}),
       [=](const torch::Tensor& g, const torch::Tensor& q) {
         return at::matmul(g.transpose(2, 3), heads_first(q));
       }},
      {"WeightsGradient", heads, tokens, dims({3}, {3}, {0, 1}, {0, 2}),
       [=](const torch::Tensor& g, const torch::Tensor& v) {
         return at::matmul(g, v.permute({0, 2, 3, 1}));
       }},
      {"ValueGradient", scores, heads, dims({2}, {2}, {0, 1}, {0, 1}),
       [=](const torch::Tensor& w, const torch::Tensor& g) {
         return at::matmul(w.transpose(2, 3), g);
       }},
  };
  return all;
}

pe::Array normal_array(const pe::Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(pe::shape_num_elements(shape));
  for (float& v : values) v = normal(rng);
  return pe::Array::from_floats(shape, values);
}

torch::Tensor to_torch(const pe::Array& a) {
  std::vector<float> values = a.to_floats();
  return torch::from_blob(values.data(), a.shape(), torch::kFloat32).clone();
}

struct Operands {
  pe::Array lhs, rhs;
  torch::Tensor torch_lhs, torch_rhs;
};

Operands make_operands(const BatchedDot& dot) {
  Operands o{normal_array(dot.lhs, 1), normal_array(dot.rhs, 2), {}, {}};
  o.torch_lhs = to_torch(o.lhs);
  o.torch_rhs = to_torch(o.rhs);
  return o;
}

pe::Buffer engine_dot(const BatchedDot& dot, const Operands& o) {
  static const pe::ir::Primitive& primitive = pe::ir::find_primitive("dot_general");
  return primitive.kernel({&o.lhs.buffer(), &o.rhs.buffer()}, dot.params).at(0);
}

// The largest |engine - torch| / (1 + max |torch|): sums of up to 49 products in other orders.
double max_rel_diff(const pe::Buffer& engine, const torch::Tensor& torch_result) {
  const torch::Tensor expected = torch_result.contiguous();
  const float* want = expected.data_ptr<float>();
  const float* got = engine.data<float>();
  double scale = 0, worst = 0;
  for (size_t i = 0; i < engine.num_elements(); ++i) {
    scale = std::max(scale, std::abs(double{want[i]}));
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return worst / (1.0 + scale);
}

// Seconds per iteration of each benchmark repetition, by benchmark name, for the targets.
std::map<std::string, std::vector<double>>& seconds_per_iteration() {
  static std::map<std::string, std::vector<double>> seconds;
  return seconds;
}

void record_since(const std::chrono::steady_clock::time_point start, benchmark::State& state,
                  const std::string& name) {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  const auto iterations = std::max<benchmark::IterationCount>(state.iterations(), 1);
  seconds_per_iteration()[name].push_back(elapsed.count() / static_cast<double>(iterations));
}

void BM_TorchMatmul(benchmark::State& state, const BatchedDot& dot) {
  const Operands o = make_operands(dot);
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    // contiguous(): the result in the engine's layout, as the engine writes it.
    benchmark::DoNotOptimize(dot.torch(o.torch_lhs, o.torch_rhs).contiguous().data_ptr<float>());
  }
  record_since(start, state, "torch/" + dot.name);
}

void BM_EngineDot(benchmark::State& state, const BatchedDot& dot) {
  const Operands o = make_operands(dot);
  // The check runs the public op (eagerly: the same kernel), which also links dot_general's
  // registration into this executable.
  const pe::Array checked = pe::dot_general(
      o.lhs, o.rhs, dot.params.ints("lhs_contracting"), dot.params.ints("rhs_contracting"),
      dot.params.ints("lhs_batch"), dot.params.ints("rhs_batch"));
  const double diff = max_rel_diff(checked.buffer(), dot.torch(o.torch_lhs, o.torch_rhs));
  state.counters["max_rel_diff"] = diff;
  if (diff > 1e-5) {
    state.SkipWithError("engine dot_general and at::matmul disagree");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(engine_dot(dot, o).bytes->data());
  record_since(start, state, "engine/" + dot.name);
}

void register_benchmarks() {
  use_single_threaded_blas();
  torch::set_num_threads(1);
  add_blas_context();
  for (const BatchedDot& dot : products()) {
    for (const auto& [prefix, fn] :
         {std::pair{"BM_TorchMatmul/", BM_TorchMatmul}, std::pair{"BM_EngineDot/", BM_EngineDot}}) {
      benchmark::RegisterBenchmark((prefix + dot.name).c_str(), fn, dot)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
}

// Google Benchmark's table, then engine / LibTorch per product; the suite fails when a
// benchmark failed its agreement check.
class DotReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) failed_ = failed_ || run.error_occurred;
    ConsoleReporter::ReportRuns(runs);
  }
  int finish() {
    for (const BatchedDot& dot : products()) add_target(dot);
    std::cout << blas_summary_line() << "\n";
    return failed_ ? 1 : 0;
  }

 private:
  bool failed_ = false;

  void add_target(const BatchedDot& dot) {
    const auto& seconds = seconds_per_iteration();
    auto engine = seconds.find("engine/" + dot.name);
    auto torch = seconds.find("torch/" + dot.name);
    if (engine == seconds.end() || torch == seconds.end()) return;
    const double engine_seconds = median(engine->second);
    const double torch_seconds = median(torch->second);
    targets_.add({"engine batched dot / at::matmul, vit attention " + dot.name,
                  engine_seconds / torch_seconds, "<= 1.0", engine_seconds <= torch_seconds,
                  fmt::format("engine {:.1f} us, LibTorch {:.1f} us", engine_seconds * 1e6,
                              torch_seconds * 1e6)});
  }
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::DotReporter>(
      argc, argv, parity::bench::register_benchmarks);
}
