// One vit-fmnist train step under the jit parallel styles, on the case's own config (8 devices
// x 32 images, the global batch 256 split over them):
//   JitStep/jit-dp     jax.jit with the parameters and optimizer state replicated, the batch
//                      split: one all-reduce per gradient
//   JitStep/jit-fsdp   the same jit with each parameter leaf split over the devices (ZeRO-3):
//                      all-gathers of the parameters, reduce-scatters of the gradients
// Both are the trainer's step (layer_step.h: make_mapped_train_step for the case's
// parallel.style) from the case's initial parameters on the first 256 training images. The
// partitioned programs run their collectives asynchronously (runtime/mapped_schedule.h): the
// counters say how many collectives a step starts and how often a device thread had to wait
// for one. The summary holds jit-fsdp's step to at most 1.2 times jit-dp's.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "layer_step.h"
#include "runtime/executor.h"
#include "summary_main.h"

namespace parity::bench {
namespace {

namespace pe = pmap_engine;

const std::vector<std::string> kStyles = {"jit-dp", "jit-fsdp"};

void BM_JitStep(benchmark::State& state, const std::string& style) {
  const CaseBatch& b = case_batch("vit-fmnist", 8, 32, {"parallel.style=" + style});
  EngineLayerStep step(b);
  state.counters["first_loss"] = step.run();
  const int64_t waits_before = pe::runtime::mapped_collective_waits();
  for (auto _ : state) step.run();
  const auto steps = static_cast<double>(state.iterations());
  state.counters["collectives_per_step"] =
      static_cast<double>(step.step().last_execution().num_collectives);
  state.counters["waits_per_step"] =
      static_cast<double>(pe::runtime::mapped_collective_waits() - waits_before) / steps;
}

void register_benchmarks() {
  for (const std::string& style : kStyles) {
    benchmark::RegisterBenchmark(("BM_JitStep/" + style).c_str(), BM_JitStep, style)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// Collects each style's step time (over every repetition) and first loss, and holds jit-fsdp to
// 1.2 times jit-dp.
class StylesReporter : public SummaryReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      failed_ = failed_ || run.error_occurred;
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      const std::string& name = run.run_name.function_name;
      seconds_[name] += run.real_accumulated_time;
      iterations_[name] += static_cast<double>(run.iterations);
      first_loss_[name] = run.counters.at("first_loss");
    }
    ConsoleReporter::ReportRuns(runs);
  }

  int finish() {
    auto dp = seconds_.find("BM_JitStep/jit-dp");
    auto fsdp = seconds_.find("BM_JitStep/jit-fsdp");
    if (dp == seconds_.end() || fsdp == seconds_.end()) return failed_ ? 1 : 0;
    const double dp_loss = first_loss_.at(dp->first);
    const double fsdp_loss = first_loss_.at(fsdp->first);
    // The two styles compute the same global mean loss, up to the order of its sums.
    const bool agreed = std::abs(dp_loss - fsdp_loss) <= 1e-5 * std::abs(dp_loss);
    if (!agreed) {
      std::cout << fmt::format(
          "FAILED: first losses {:.7f} (jit-dp) and {:.7f} (jit-fsdp) "
          "differ; the timing compares different work\n",
          dp_loss, fsdp_loss);
    }
    const double dp_step = dp->second / iterations_.at(dp->first);
    const double fsdp_step = fsdp->second / iterations_.at(fsdp->first);
    const double ratio = fsdp_step / dp_step;
    targets_.add(
        {"vit-fmnist jit-fsdp step / jit-dp step, 8 devices x 32", ratio, "<= 1.2", ratio <= 1.2,
         fmt::format("jit-fsdp {:.1f} ms, jit-dp {:.1f} ms", fsdp_step * 1e3, dp_step * 1e3)});
    return agreed && !failed_ ? 0 : 1;
  }

 private:
  std::map<std::string, double> seconds_;     // summed over repetitions
  std::map<std::string, double> iterations_;  // likewise
  std::map<std::string, double> first_loss_;
  bool failed_ = false;
};

}  // namespace
}  // namespace parity::bench

int main(int argc, char** argv) {
  return parity::bench::run_with_summary<parity::bench::StylesReporter>(
      argc, argv, parity::bench::register_benchmarks);
}
