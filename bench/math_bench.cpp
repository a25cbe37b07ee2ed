// XLA's f32 element-wise approximations (pmap_engine/src/ops/xla_math.h), which the engine runs
// for f32 tanh, exp and logistic, against the glibc scalar loop the engine ran before
// (std::tanh, std::exp, 1 / (1 + std::exp(-x))), over 64K floats, one thread.
//
// Each function's glibc benchmark runs first; the XLA benchmark that follows checks its results
// against glibc's (max_ulp_vs_glibc, within the bound measured over the whole f32 range, see
// tests/pmap_engine/xla_math_test.cpp) before timing, and reports glibc_over_xla = glibc time /
// XLA time (above 1: the new code is faster). The summary after the table repeats the ratios,
// from CPU time: one thread that never waits, so CPU time is its time without the share that
// other processes of a busy machine take.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ops/xla_math.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace xm = pmap_engine::xla_math;

constexpr size_t kCount = 64 * 1024;

struct MathFunction {
  std::string name;
  float low, high;             // inputs drawn uniformly from [low, high]
  float (*glibc)(float);       // the previous per-element computation
  xm::F32BlockFn xla;          // the block function that replaced it
  int64_t max_ulp_vs_glibc;    // measured over all floats (xla_math_test.cpp)
};

const std::vector<MathFunction>& functions() {
  static const std::vector<MathFunction> all = {
      {"tanh", -5.0f, 5.0f, [](float x) { return std::tanh(x); }, xm::tanh_f32, 5},
      {"exp", -20.0f, 20.0f, [](float x) { return std::exp(x); }, xm::exp_f32, 1},
      {"logistic", -20.0f, 20.0f, [](float x) { return 1.0f / (1.0f + std::exp(-x)); },
       xm::logistic_f32, 4},
  };
  return all;
}

std::vector<float> inputs(const MathFunction& f) {
  std::mt19937 rng(20);
  std::uniform_real_distribution<float> dist(f.low, f.high);
  std::vector<float> values(kCount);
  for (float& v : values) v = dist(rng);
  return values;
}

int64_t ulp_distance(float a, float b) {
  auto ordered = [](float v) {
    int32_t i;
    std::memcpy(&i, &v, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Seconds per pass over the kCount floats, per benchmark name (filled as benchmarks run).
std::map<std::string, double>& seconds_per_pass() {
  static std::map<std::string, double> table;
  return table;
}

void BM_Glibc(benchmark::State& state, const MathFunction& f) {
  const std::vector<float> in = inputs(f);
  std::vector<float> out(kCount);
  for (auto _ : state) {
    for (size_t i = 0; i < kCount; ++i) out[i] = f.glibc(in[i]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kCount));
}

void BM_Xla(benchmark::State& state, const MathFunction& f) {
  const std::vector<float> in = inputs(f);
  std::vector<float> out(kCount);
  f.xla(in.data(), out.data(), kCount);
  int64_t worst = 0;
  for (size_t i = 0; i < kCount; ++i) worst = std::max(worst, ulp_distance(out[i], f.glibc(in[i])));
  state.counters["max_ulp_vs_glibc"] = static_cast<double>(worst);
  if (worst > f.max_ulp_vs_glibc) {
    state.SkipWithError("XLA approximation and glibc differ by more than the measured bound");
    return;
  }
  for (auto _ : state) {
    f.xla(in.data(), out.data(), kCount);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kCount));
}

void register_benchmarks() {
  for (const MathFunction& f : functions()) {
    benchmark::RegisterBenchmark(("BM_Glibc/" + f.name).c_str(), BM_Glibc, f)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_Xla/" + f.name).c_str(), BM_Xla, f)
        ->Unit(benchmark::kMicrosecond);
  }
}

// Google Benchmark's table, then glibc / XLA per function; fails when a check failed.
class SpeedupReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      failed_ = failed_ || run.error_occurred;
      if (!run.error_occurred && run.iterations > 0) {
        seconds_per_pass()[run.benchmark_name()] =
            run.GetAdjustedCPUTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  int finish() {
    std::cout << "\nglibc / XLA approximation, CPU time, " << kCount
              << " floats per pass (above 1: faster)\n";
    for (const MathFunction& f : functions()) {
      const auto glibc = seconds_per_pass().find("BM_Glibc/" + f.name);
      const auto xla = seconds_per_pass().find("BM_Xla/" + f.name);
      if (glibc == seconds_per_pass().end() || xla == seconds_per_pass().end()) continue;
      std::cout << "  " << std::left << std::setw(9) << f.name << std::fixed
                << std::setprecision(1) << glibc->second / xla->second << "x  ("
                << std::setprecision(3) << glibc->second * 1e9 / kCount << " ns -> "
                << xla->second * 1e9 / kCount << " ns per element)\n";
      targets_.add({"glibc / XLA approximation, f32 " + f.name, glibc->second / xla->second, "",
                    std::nullopt,
                    fmt::format("{:.3f} ns -> {:.3f} ns per element",
                                glibc->second * 1e9 / kCount, xla->second * 1e9 / kCount)});
    }
    return failed_ ? 1 : 0;
  }

 private:
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::SpeedupReporter>(
      argc, argv, parity::bench::register_benchmarks);
}
