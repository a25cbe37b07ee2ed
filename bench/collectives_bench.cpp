// One all-reduce of the same float32 bytes, engine vs Gloo (participants are devices / rank
// threads of this process):
//   EngineMappedPsum/P/B a pmapped psum as a JAX user runs one on a sharded array: the traced
//                        per-device program `psum(x, 'x')` run by the mapped executor
//                        (runtime::execute_mapped) on P devices whose B-byte inputs are already
//                        resident (no slicing of a host array, no stacking of the outputs,
//                        traced once before timing); each device gets its own result buffer.
//   EnginePsum/P/B       the psum collective kernel alone (pmap_engine/src/ops/collectives.cpp),
//                        called as the executor calls it: once, with every device's operand.
//   GlooAllReduce/P/B    c10d::ProcessGroupGloo allreduce, in place, of B bytes on P rank threads
//                        (one intra-op thread each).
// What differs: Gloo reduces in place over loopback TCP between P threads; the engine reads
// the P inputs in shared memory and writes P fresh outputs (allocation and first-touch page
// faults included, as in a real step). The public pmap() call on a host-stacked [P, ...] array
// would add a copy of every input block and of every output block around this.
// Counters as nccl-tests reports them: algbw = bytes / time, busbw = algbw * 2(P-1)/P
// (doc/PERFORMANCE.md). Each benchmark checks its sum before it times anything and fails if it
// is wrong: device d holds d+1 in every element, so the sum P(P+1)/2 is exact in float32.
// At the end the suite prints the engine / Gloo throughput ratios per (P, B).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "blas_info.h"
#include "ir/axis_env.h"
#include "ir/params.h"
#include "ir/primitive.h"
#include "pmap_engine/array.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/mesh.h"
#include "process_group.h"
#include "runtime/executor.h"
#include "runtime/program_cache.h"
#include "rank_pool.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace pe = pmap_engine;
using ddp_ref::make_gloo_group;
constexpr std::chrono::milliseconds kTimeout{60000};

// collectives.cpp registers psum at static initialisation, and nothing here calls into it
// directly: a volatile pointer to one of its functions (read below, so it stays) keeps its
// object file in the link, pmap_engine being a static library.
int64_t (*volatile kLinkCollectives)(const std::string&) = &pe::axis_size;

void set_bandwidth_counters(benchmark::State& state, int64_t participants, int64_t num_bytes) {
  const double moved = static_cast<double>(num_bytes) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(moved));
  state.counters["algbw_GBps"] = benchmark::Counter(moved / 1e9, benchmark::Counter::kIsRate);
  state.counters["busbw_GBps"] = benchmark::Counter(
      moved / 1e9 * 2.0 * static_cast<double>(participants - 1) / static_cast<double>(participants),
      benchmark::Counter::kIsRate);
}

float expected_sum(int64_t participants) {
  return static_cast<float>(participants * (participants + 1) / 2);
}

void BM_EnginePsum(benchmark::State& state) {
  const int64_t participants = state.range(0);
  const int64_t num_bytes = state.range(1);
  const int64_t num_elements = num_bytes / static_cast<int64_t>(sizeof(float));
  if (kLinkCollectives == nullptr) return;
  const pe::ir::Primitive& psum = pe::ir::find_primitive("psum");
  // reduction_params(): the kernel reads axis_size; axes and axis_name are what JAX prints.
  const pe::ir::Params params{{"axes", std::string("('x',)")},
                              {"axis_name", std::string("x")},
                              {"axis_size", participants}};

  std::vector<pe::Buffer> inputs;
  std::vector<std::vector<const pe::Buffer*>> operands(participants);
  inputs.reserve(participants);
  for (int64_t d = 0; d < participants; ++d) {
    inputs.push_back(pe::Buffer::allocate(pe::DType::f32, {num_elements}));
    std::fill_n(inputs.back().data<float>(), num_elements, static_cast<float>(d + 1));
  }
  for (int64_t d = 0; d < participants; ++d) operands[d] = {&inputs[d]};

  // Correctness first.
  {
    auto outputs = psum.collective_kernel(operands, params);
    const float expected = expected_sum(participants);
    for (int64_t d = 0; d < participants; ++d) {
      const pe::Buffer& out = outputs[d].at(0);
      const float* values = out.data<float>();
      if (out.num_elements() != static_cast<size_t>(num_elements) ||
          !std::all_of(values, values + num_elements, [&](float v) { return v == expected; })) {
        state.SkipWithError(fmt::format("device {} holds a wrong sum", d).c_str());
        return;
      }
    }
  }

  for (auto _ : state) {
    auto outputs = psum.collective_kernel(operands, params);
    benchmark::DoNotOptimize(outputs);
  }
  set_bandwidth_counters(state, participants, num_bytes);
}

// True when every device holds exactly `expected` in every element.
bool holds_sum(const std::vector<std::vector<pe::Buffer>>& per_device, int64_t num_elements,
               float expected, std::string* error) {
  for (size_t d = 0; d < per_device.size(); ++d) {
    const pe::Buffer& out = per_device[d].at(0);
    const float* values = out.data<float>();
    if (out.num_elements() != static_cast<size_t>(num_elements) ||
        !std::all_of(values, values + num_elements, [&](float v) { return v == expected; })) {
      *error = fmt::format("device {} holds a wrong sum", d);
      return false;
    }
  }
  return true;
}

void BM_EngineMappedPsum(benchmark::State& state) {
  const int64_t participants = state.range(0);
  const int64_t num_bytes = state.range(1);
  const int64_t num_elements = num_bytes / static_cast<int64_t>(sizeof(float));
  // Resident per-device inputs, as a sharded array's shards.
  std::vector<std::vector<pe::Buffer>> inputs(participants);
  for (int64_t d = 0; d < participants; ++d) {
    pe::Buffer buffer = pe::Buffer::allocate(pe::DType::f32, {num_elements});
    std::fill_n(buffer.data<float>(), num_elements, static_cast<float>(d + 1));
    inputs[d].push_back(std::move(buffer));
  }
  // The per-device program, traced once with the axis bound (pmap's trace, without the cache).
  pe::runtime::TracedFunction traced = [&] {
    pe::ir::ScopedAxis axis("x", participants);
    return pe::runtime::trace_function(
        [](const std::vector<pe::Tree>& args) { return pe::Tree(pe::psum(args[0].leaf(), "x")); },
        {pe::Tree(pe::Array(inputs[0][0]))}, {},
        [](size_t, size_t, const pe::Array& leaf) { return leaf.shape(); }, "psum bench");
  }();
  const std::vector<bool> donated = {false};
  const std::vector<pe::MeshAxis> mesh = {{"x", participants}};
  auto run = [&] { return pe::runtime::execute_mapped(traced.program, inputs, donated, mesh); };

  // Correctness first.
  {
    std::string error;
    if (!holds_sum(run().per_device_outputs, num_elements, expected_sum(participants), &error)) {
      state.SkipWithError(error.c_str());
      return;
    }
  }

  for (auto _ : state) {
    auto result = run();
    benchmark::DoNotOptimize(result);
  }
  set_bandwidth_counters(state, participants, num_bytes);
}

void BM_GlooAllReduce(benchmark::State& state) {
  torch::set_num_threads(1);
  const int64_t participants = state.range(0);
  const int64_t num_bytes = state.range(1);
  const int64_t num_elements = num_bytes / static_cast<int64_t>(sizeof(float));
  RankPool pool(participants);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>> groups(participants);
  pool.run(
      [&](int64_t rank) { groups[rank] = make_gloo_group(store, rank, participants, kTimeout); });
  std::vector<torch::Tensor> buffers(participants);
  auto all_reduce = [&](int64_t rank) {
    std::vector<torch::Tensor> tensors = {buffers[rank]};
    groups[rank]->allreduce(tensors)->wait();
  };

  // Correctness first.
  for (int64_t rank = 0; rank < participants; ++rank) {
    buffers[rank] = torch::full({num_elements}, static_cast<float>(rank + 1));
  }
  pool.run(all_reduce);
  const float expected = expected_sum(participants);
  for (int64_t rank = 0; rank < participants; ++rank) {
    if (!buffers[rank].eq(expected).all().item<bool>()) {
      state.SkipWithError(fmt::format("rank {} holds a wrong sum", rank).c_str());
      return;
    }
    buffers[rank].zero_();  // in place: zeros stay zeros however long it runs
  }

  for (auto _ : state) pool.run(all_reduce);
  set_bandwidth_counters(state, participants, num_bytes);
}

// The machine's streaming bandwidth, the roofline of a reduction over shared memory: c += b over
// B bytes each, the range split across the cores as the psum kernel splits its own, counted as
// STREAM counts its Add kernel (3 x B moved: b and c read, c written).
void BM_AddBandwidth(benchmark::State& state) {
  const auto num_elements = static_cast<size_t>(state.range(0)) / sizeof(float);
  std::vector<float> b(num_elements, 1.0f);
  std::vector<float> c(num_elements, 0.0f);
  const size_t workers = std::max(1u, std::thread::hardware_concurrency());
  auto add = [&] {
    auto range = [&](size_t w) {
      const size_t begin = num_elements * w / workers;
      const size_t end = num_elements * (w + 1) / workers;
      for (size_t i = begin; i < end; ++i) c[i] += b[i];
    };
    std::vector<std::thread> threads;
    for (size_t w = 1; w < workers; ++w) threads.emplace_back(range, w);
    range(0);
    for (auto& thread : threads) thread.join();
  };
  // Correctness first.
  add();
  if (!std::all_of(c.begin(), c.end(), [](float v) { return v == 1.0f; })) {
    state.SkipWithError("c += b computed a wrong sum");
    return;
  }
  for (auto _ : state) {
    add();
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GBps"] = benchmark::Counter(
      3.0 * static_cast<double>(state.range(0)) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AddBandwidth)
    ->ArgName("bytes")
    ->Arg(16 << 20)
    ->Arg(64 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"participants", "bytes"})
      ->ArgsProduct({{2, 4, 8}, {4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_EngineMappedPsum)->Apply(grid);
BENCHMARK(BM_EnginePsum)->Apply(grid);
BENCHMARK(BM_GlooAllReduce)->Apply(grid);

// Keeps each (participants, bytes) run's time and busbw, to print engine / Gloo at the end.
class RatioReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      if (run.run_name.function_name == "BM_AddBandwidth") {
        add_gbps_[run.run_name.args] = run.counters.at("GBps");
        continue;
      }
      Result& result = results_[run.run_name.args][run.run_name.function_name];
      result.seconds = run.real_accumulated_time / static_cast<double>(run.iterations);
      auto busbw = run.counters.find("busbw_GBps");
      if (busbw != run.counters.end()) result.busbw = busbw->second;
    }
    for (const auto& run : runs) failed_ = failed_ || run.error_occurred;
    ConsoleReporter::ReportRuns(runs);
  }

  // Non-zero when a benchmark failed its correctness check (SkipWithError).
  int finish() {
    add_roofline_targets();
    std::cout << "\nengine / Gloo allreduce throughput (>1: engine faster); mapped: pmapped psum on "
                 "resident shards, kernel: the psum kernel alone\n";
    std::cout << fmt::format("{:<34} {:>9} {:>9} {:>14} {:>14}\n", "participants/bytes",
                             "mapped", "kernel", "mapped busbw", "gloo busbw");
    for (const auto& [args, by_function] : results_) {
      auto mapped = by_function.find("BM_EngineMappedPsum");
      auto kernel = by_function.find("BM_EnginePsum");
      auto gloo = by_function.find("BM_GlooAllReduce");
      if (gloo == by_function.end()) continue;
      if (mapped == by_function.end() && kernel == by_function.end()) continue;
      auto ratio = [&](const auto& engine) {
        return engine == by_function.end()
                   ? std::string("-")
                   : fmt::format("{:.2f}", gloo->second.seconds / engine->second.seconds);
      };
      std::cout << fmt::format(
          "{:<34} {:>9} {:>9} {:>9} GB/s {:>9.2f} GB/s\n", args, ratio(mapped), ratio(kernel),
          mapped == by_function.end() ? std::string("-")
                                      : fmt::format("{:.2f}", mapped->second.busbw),
          gloo->second.busbw);
    }
    std::cout << blas_summary_line() << "\n";
    if (failed_) std::cout << "FAILED: a collective computed a wrong sum (see above)\n";
    return failed_ ? 1 : 0;
  }

 private:
  struct Result {
    double seconds = 0;
    double busbw = 0;
  };
  // Keyed by the args text; ordered by (participants, bytes) through the key below.
  struct ArgsOrder {
    static std::pair<long long, long long> parse(const std::string& args) {
      long long participants = 0;
      long long bytes = 0;
      std::sscanf(args.c_str(), "participants:%lld/bytes:%lld", &participants, &bytes);
      return {participants, bytes};
    }
    bool operator()(const std::string& a, const std::string& b) const {
      return parse(a) < parse(b);
    }
  };
  // The pmapped psum over 8 devices against the time of its memory traffic at c += b's rate
  // (measured in this run, at the same size). With a result buffer per device the psum must
  // read the P inputs and write the P outputs: 2 P B bytes at least. A busbw target cannot
  // express this bound: busbw counts 2(P-1)/P B per participant, so at memory speed it reaches
  // only (P-1)/P^2 of the memory bandwidth.
  void add_roofline_targets() {
    constexpr int64_t kDevices = 8;
    constexpr double kMaxRatio = 1.5;
    for (const auto& [bytes_args, add_gbps] : add_gbps_) {
      auto found = results_.find(fmt::format("participants:{}/{}", kDevices, bytes_args));
      if (found == results_.end()) continue;
      auto mapped = found->second.find("BM_EngineMappedPsum");
      if (mapped == found->second.end()) continue;
      const double bytes = static_cast<double>(ArgsOrder::parse(found->first).second);
      const double traffic_seconds = 2.0 * kDevices * bytes / (add_gbps * 1e9);
      const double ratio = mapped->second.seconds / traffic_seconds;
      targets_.add({fmt::format("psum time / its memory traffic's time, {} devices, {}", kDevices,
                                bytes_args),
                    ratio, fmt::format("<= {}", kMaxRatio), ratio <= kMaxRatio,
                    fmt::format("psum {:.2f} ms; {} reads + {} writes of the buffer at c += b's "
                                "{:.2f} GB/s: {:.2f} ms",
                                mapped->second.seconds * 1e3, kDevices, kDevices, add_gbps,
                                traffic_seconds * 1e3)});
    }
  }

  std::map<std::string, std::map<std::string, Result>, ArgsOrder> results_;
  std::map<std::string, double> add_gbps_;  // by "bytes:N"
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::RatioReporter>(
      argc, argv, parity::bench::add_blas_context);
}
