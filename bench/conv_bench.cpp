// The engine's conv_general_dilated against LibTorch on the convolutions of cnn-fmnist's ResNet
// and vit-fmnist's patch embedding (batch 32, 28x28x1 input), one thread each (oneDNN and
// OpenBLAS single-threaded as the engine runs them, torch::set_num_threads(1)), on both of the
// engine's implementations: oneDNN (BM_Engine*, the default) and the reference im2col kernels
// (BM_EngineIm2col*, PE_CONV=im2col):
//   Forward   the engine's conv op vs at::conv2d
//   Backward        the engine's conv VJP rule, run eagerly: both cotangents (input and
//                   kernel), vs at::convolution_backward for input and weight
//   BackwardInput   the input's cotangent alone (the VJP asked for input 0 only), vs
//                   at::convolution_backward with output_mask {true, false, false}
//   BackwardKernel  the kernel's cotangent alone, vs output_mask {false, true, false}
// Torch runs first for each shape and pass; the engine benchmark that follows reports counter
// engine_over_torch = engine time / torch time (below 1: the engine is faster). Before timing,
// each engine benchmark checks its results against LibTorch's (max_rel_diff), so that both
// time the same work. With --benchmark_repetitions, each engine repetition is divided by the
// median of LibTorch's repetitions of the same pass and shape.
//
// Padding is symmetric (lo = hi), as at::conv2d takes it: 1 for the 3x3 kernels (what "SAME"
// gives at stride 1; at stride 2 on 28x28, "SAME" would be (0, 1) and PyTorch models use
// (1, 1): same output shape and work), 0 for the 1x1 projection and the 4x4 patch embedding.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "blas_info.h"
#include "ir/primitive.h"
#include "pmap_engine/ops.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace pe = pmap_engine;

struct ConvShape {
  std::string name;
  int64_t size;  // H = W
  int64_t in_features;
  int64_t out_features;
  int64_t kernel;
  int64_t stride;
  int64_t padding;  // per side
};

constexpr int64_t kBatch = 32;

const std::vector<ConvShape>& shapes() {
  static const std::vector<ConvShape> all = {
      {"stem_3x3_1to16_s1_28", 28, 1, 16, 3, 1, 1},   {"3x3_16to16_s1_28", 28, 16, 16, 3, 1, 1},
      {"3x3_16to32_s2_28", 28, 16, 32, 3, 2, 1},      {"3x3_32to32_s1_14", 14, 32, 32, 3, 1, 1},
      {"proj_1x1_16to32_s2_28", 28, 16, 32, 1, 2, 0}, {"patch_4x4_1to64_s4_28", 28, 1, 64, 4, 4, 0},
  };
  return all;
}

// One shape's operands, in both layouts: the engine's NHWC/HWIO and LibTorch's NCHW/OIHW.
struct Operands {
  pe::Array x, w, g;         // [B, H, W, C], [K, K, C, O], [B, H', W', O]
  torch::Tensor tx, tw, tg;  // [B, C, H, W], [O, C, K, K], [B, O, H', W']
};

std::vector<float> normal_values(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

Operands make_operands(const ConvShape& s) {
  const int64_t out = (s.size + 2 * s.padding - s.kernel) / s.stride + 1;
  const pe::Shape x_shape = {kBatch, s.size, s.size, s.in_features};
  const pe::Shape w_shape = {s.kernel, s.kernel, s.in_features, s.out_features};
  const pe::Shape g_shape = {kBatch, out, out, s.out_features};
  Operands o{pe::Array::from_floats(x_shape, normal_values(pe::shape_num_elements(x_shape), 1)),
             pe::Array::from_floats(w_shape, normal_values(pe::shape_num_elements(w_shape), 2)),
             pe::Array::from_floats(g_shape, normal_values(pe::shape_num_elements(g_shape), 3)),
             {},
             {},
             {}};
  auto tensor = [](const pe::Array& a, std::vector<int64_t> permutation) {
    const std::vector<float> values = a.to_floats();
    // clone() first: contiguous() returns a view when the permutation only moves a size-1
    // dimension, and `values` dies here.
    return torch::from_blob(const_cast<float*>(values.data()), a.shape(), torch::kFloat32)
        .clone()
        .permute(permutation)
        .contiguous();
  };
  o.tx = tensor(o.x, {0, 3, 1, 2});
  o.tw = tensor(o.w, {3, 2, 0, 1});
  o.tg = tensor(o.g, {0, 3, 1, 2});
  return o;
}

pe::ir::Params conv_params(const ConvShape& s) {
  return {{"window_strides", std::vector<int64_t>{s.stride, s.stride}},
          {"padding", std::vector<int64_t>(4, s.padding)},
          {"lhs_dilation", std::vector<int64_t>{1, 1}},
          {"rhs_dilation", std::vector<int64_t>{1, 1}}};
}

pe::Array engine_forward(const Operands& o, const ConvShape& s) {
  return pe::conv_general_dilated(o.x, o.w, {s.stride, s.stride},
                                  {{s.padding, s.padding}, {s.padding, s.padding}});
}

// Which cotangents a backward pass computes: the input's (0), the kernel's (1), or both.
struct BackwardPass {
  std::string name;
  bool input;
  bool kernel;
};

const std::vector<BackwardPass>& backward_passes() {
  static const std::vector<BackwardPass> all = {
      {"Backward", true, true}, {"BackwardInput", true, false}, {"BackwardKernel", false, true}};
  return all;
}

// The conv primitive's VJP rule on concrete arrays: it runs eagerly, op by op. An entry is
// invalid where the pass does not ask for that cotangent.
std::vector<pe::Array> engine_backward(const Operands& o, const ConvShape& s,
                                       const pe::Array& forward, const BackwardPass& pass) {
  static const pe::ir::Primitive& conv = pe::ir::find_primitive("conv_general_dilated");
  const std::vector<pe::Array> inputs = {o.x, o.w};
  const std::vector<pe::Array> outputs = {forward};
  const pe::ir::Params params = conv_params(s);
  const std::vector<pe::Array> cotangents = {o.g};
  return conv.vjp({inputs, outputs, params, cotangents, {pass.input, pass.kernel}});
}

torch::Tensor torch_forward(const Operands& o, const ConvShape& s) {
  return at::conv2d(o.tx, o.tw, {}, {s.stride, s.stride}, {s.padding, s.padding});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> torch_backward(const Operands& o, const ConvShape& s,
                                                              const BackwardPass& pass) {
  return at::convolution_backward(o.tg, o.tx, o.tw, c10::nullopt, {s.stride, s.stride},
                                  {s.padding, s.padding}, {1, 1}, false, {0, 0}, 1,
                                  {pass.input, pass.kernel, false});
}

// The largest |engine - torch| / (1 + max |torch|), torch's tensor brought to the engine's
// layout. Relative to the largest element: a kernel gradient element sums B * H' * W' products
// (25088 here), whose f32 rounding depends on the summation order, and may cancel to near 0.
double max_rel_diff(const pe::Array& engine, const torch::Tensor& torch_nchw_like,
                    std::vector<int64_t> to_engine_layout) {
  const torch::Tensor expected = torch_nchw_like.permute(to_engine_layout).contiguous();
  const std::vector<float> got = engine.to_floats();
  const float* want = expected.data_ptr<float>();
  double scale = 0;
  for (size_t i = 0; i < got.size(); ++i) scale = std::max(scale, std::abs(double{want[i]}));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return worst / (1.0 + scale);
}

// Seconds per iteration of each LibTorch repetition, by "<pass>/<shape>", for the engine's
// ratio.
std::map<std::string, std::vector<double>>& torch_seconds() {
  static std::map<std::string, std::vector<double>> seconds;
  return seconds;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
}

// Runs `body` for every iteration of `state`; returns the wall time per iteration.
template <typename Body>
double timed_loop(benchmark::State& state, Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) body();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() /
         static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
}

void report_ratio(benchmark::State& state, const std::string& key, double engine_seconds) {
  auto torch = torch_seconds().find(key);
  if (torch != torch_seconds().end() && !torch->second.empty()) {
    state.counters["engine_over_torch"] = engine_seconds / median(torch->second);
  }
}

constexpr double kAgreement = 1e-5;  // f32 sums of up to 25088 products in other orders

void BM_TorchForward(benchmark::State& state, const ConvShape& s) {
  const Operands o = make_operands(s);
  torch_seconds()["Forward/" + s.name].push_back(
      timed_loop(state, [&] { benchmark::DoNotOptimize(torch_forward(o, s).data_ptr<float>()); }));
}

// Runs the engine's convs on the reference im2col kernels (PE_CONV=im2col) for its lifetime,
// or on the default ones.
class ConvImplementation {
 public:
  explicit ConvImplementation(bool im2col) {
    if (im2col) setenv("PE_CONV", "im2col", 1);
  }
  ~ConvImplementation() { unsetenv("PE_CONV"); }
};

void BM_EngineForward(benchmark::State& state, const ConvShape& s, bool im2col) {
  const ConvImplementation implementation(im2col);
  const Operands o = make_operands(s);
  const double diff = max_rel_diff(engine_forward(o, s), torch_forward(o, s), {0, 2, 3, 1});
  state.counters["max_rel_diff"] = diff;
  if (diff > kAgreement) {
    state.SkipWithError("engine and LibTorch forward convolutions disagree");
    return;
  }
  const double seconds = timed_loop(state, [&] {
    pe::Array out = engine_forward(o, s);
    benchmark::DoNotOptimize(out);
  });
  report_ratio(state, "Forward/" + s.name, seconds);
}

void BM_TorchBackward(benchmark::State& state, const ConvShape& s, const BackwardPass& pass) {
  const Operands o = make_operands(s);
  torch_seconds()[pass.name + "/" + s.name].push_back(timed_loop(state, [&] {
    auto grads = torch_backward(o, s, pass);
    benchmark::DoNotOptimize(grads);
  }));
}

void BM_EngineBackward(benchmark::State& state, const ConvShape& s, const BackwardPass& pass,
                       bool im2col) {
  const ConvImplementation implementation(im2col);
  const Operands o = make_operands(s);
  const pe::Array forward = engine_forward(o, s);
  const std::vector<pe::Array> grads = engine_backward(o, s, forward, pass);
  const auto expected = torch_backward(o, s, pass);
  double diff = 0;
  if (pass.input) diff = max_rel_diff(grads[0], std::get<0>(expected), {0, 2, 3, 1});
  if (pass.kernel) {
    diff = std::max(diff, max_rel_diff(grads[1], std::get<1>(expected), {2, 3, 1, 0}));
  }
  state.counters["max_rel_diff"] = diff;
  if (diff > kAgreement) {
    state.SkipWithError("engine and LibTorch convolution gradients disagree");
    return;
  }
  const double seconds = timed_loop(state, [&] {
    std::vector<pe::Array> result = engine_backward(o, s, forward, pass);
    benchmark::DoNotOptimize(result);
  });
  report_ratio(state, pass.name + "/" + s.name, seconds);
}

// Torch before the engine for each shape and pass, so the engine's ratio finds its time.
void register_benchmarks() {
  use_single_threaded_blas();
  torch::set_num_threads(1);
  add_blas_context();
  auto add = [](const std::string& name, auto fn, auto... args) {
    benchmark::RegisterBenchmark(name.c_str(), fn, args...)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  };
  for (const ConvShape& s : shapes()) {
    add("BM_TorchForward/" + s.name, BM_TorchForward, s);
    add("BM_EngineForward/" + s.name, BM_EngineForward, s, false);
    add("BM_EngineIm2colForward/" + s.name, BM_EngineForward, s, true);
    for (const BackwardPass& pass : backward_passes()) {
      add("BM_Torch" + pass.name + "/" + s.name, BM_TorchBackward, s, pass);
      add("BM_Engine" + pass.name + "/" + s.name, BM_EngineBackward, s, pass, false);
      add("BM_EngineIm2col" + pass.name + "/" + s.name, BM_EngineBackward, s, pass, true);
    }
  }
}

// Google Benchmark's table, then per pass the targets: the engine's time over LibTorch's, summed
// over the shapes; the suite fails when a benchmark failed its agreement check.
class FailureReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      failed_ = failed_ || run.error_occurred;
      if (run.run_type == Run::RT_Iteration && !run.error_occurred) {
        microseconds_[run.benchmark_name()].push_back(run.GetAdjustedRealTime());
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  int finish() {
    add_pass_targets();
    std::cout << blas_summary_line() << "\n";
    return failed_ ? 1 : 0;
  }

 private:
  // Median time of "BM_<family>/<shape>" (microseconds), 0 when it did not run.
  double median_of(const std::string& family, const std::string& shape) const {
    auto found = microseconds_.find("BM_" + family + "/" + shape + "/real_time");
    return found == microseconds_.end() ? 0 : median(found->second);
  }

  void add_pass_targets() {
    std::vector<std::string> passes = {"Forward"};
    for (const BackwardPass& pass : backward_passes()) passes.push_back(pass.name);
    for (const std::string& pass : passes) {
      for (const bool im2col : {false, true}) {
        const std::string engine_family = (im2col ? "EngineIm2col" : "Engine") + pass;
        double engine = 0, torch = 0;
        for (const ConvShape& s : shapes()) {
          const double engine_us = median_of(engine_family, s.name);
          const double torch_us = median_of("Torch" + pass, s.name);
          if (engine_us == 0 || torch_us == 0) continue;
          engine += engine_us;
          torch += torch_us;
        }
        if (engine == 0 || torch == 0) continue;
        const double ratio = engine / torch;
        const std::optional<bool> met = im2col ? std::nullopt : std::optional<bool>(ratio <= 1.0);
        targets_.add({"engine conv / LibTorch conv, " + pass + (im2col ? ", im2col" : ", oneDNN"),
                      ratio, im2col ? "" : "<= 1.0", met,
                      fmt::format("engine {:.0f} us, LibTorch {:.0f} us over the shapes", engine,
                                  torch)});
      }
    }
  }

  std::map<std::string, std::vector<double>> microseconds_;
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::FailureReporter>(
      argc, argv, parity::bench::register_benchmarks);
}
