// The speed gate under load (issue 20): in each trial a real computation is timed in interleaved
// runs of baseline and candidate, A B, B A, A B, ..., while another process keeps a core busy, and
// the gate's verdict (compare/speed_verdict.h, the default 5% threshold) is taken from the step
// times. The candidate does exactly 10% more work in the "slower" trials (22 matrix products a
// step where the baseline does 20) and the same work in the "same" trials. Every slower trial
// must fail and every same trial pass; neither may ever give the opposite verdict.
//
// An "inconclusive" verdict is the gate's answer to load it cannot see through, and its advice
// is to rerun with more repetitions (`parity gate --speed-reruns N`); a trial does what that
// advice says, adding kPairs pairs at a time up to kMaxPairs, as a user would. Measured here
// (2026-12-06, 20 trials of each kind, twice): 3 of 80 first verdicts were inconclusive, each
// settled by 60 pairs. With the median in place of the gate's 10th percentile, 16 of 80 were,
// and 2 were still inconclusive at 160 pairs (speed_verdict.h says why).
//
// PARITY_SPEED_GATE_TRIALS=N runs N trials of each kind (default 5) and prints each trial's
// interval and the detection and false-alarm rates:
//   PARITY_SPEED_GATE_TRIALS=20 build/tests/compare/speed_gate_load_tests
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include "parity/compare/gate.h"
#include "parity/compare/speed_verdict.h"

namespace parity::compare {
namespace {

constexpr int kBaselineProducts = 20;
constexpr int kSlowerProducts = 22;  // 10% more work
// Per trial: 20 pairs of 40 timed steps (after a warm-up step) of about 0.6 ms each: a trial
// takes about a second, and the 95% interval is some 3% wide, inside the 4% between the
// slower candidate's ratio (1/1.1 = 0.909) and the threshold (0.95) and the 5% between the
// same candidate's (1) and the threshold. (12 pairs of 30 steps gave intervals up to 4.5% wide
// here, one of which ended at 0.944.)
constexpr int kPairs = 20;
constexpr int kMaxPairs = 8 * kPairs;
constexpr int kStepsPerRun = 40;
constexpr int kDefaultTrials = 5;

// Another process that keeps a core busy until destroyed (the load of the test: a
// neighbour's job on a shared runner).
class BusyCore {
 public:
  BusyCore() : pid_(fork()) {
    if (pid_ == 0) {
      for (volatile uint64_t spin = 0;; spin = spin + 1) {
      }
    }
    if (pid_ < 0) ADD_FAILURE() << "fork failed: the load process could not be started";
  }
  ~BusyCore() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;

 private:
  pid_t pid_;
};

// A real fixed computation: products of 64 x 64 matrices, accumulated so none is optimised away.
class Workload {
 public:
  Workload() {
    for (size_t i = 0; i < kSize * kSize; ++i) {
      a_[i] = static_cast<float>(i % 7) * 0.01F;
      b_[i] = static_cast<float>(i % 5) * 0.01F;
    }
  }

  // The seconds `products` matrix products take.
  double timed_step(int products) {
    const auto start = std::chrono::steady_clock::now();
    for (int p = 0; p < products; ++p) multiply_accumulate();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count();
  }

  // One run: a warm-up step, as a training run's first step, left out like the gate leaves it.
  StepTimes timed_run(int products) {
    timed_step(products);
    StepTimes steps;
    for (int s = 0; s < kStepsPerRun; ++s) steps.push_back(timed_step(products));
    return steps;
  }

  float checksum() const { return c_[0]; }

 private:
  static constexpr size_t kSize = 64;

  void multiply_accumulate() {
    for (size_t i = 0; i < kSize; ++i) {
      for (size_t k = 0; k < kSize; ++k) {
        const float a = a_[i * kSize + k];
        for (size_t j = 0; j < kSize; ++j) c_[i * kSize + j] += a * b_[k * kSize + j];
      }
    }
  }

  std::array<float, kSize * kSize> a_{}, b_{}, c_{};
};

int trials() {
  const char* text = std::getenv("PARITY_SPEED_GATE_TRIALS");
  return text == nullptr ? kDefaultTrials : std::max(1, std::atoi(text));
}

// Runs `trials()` trials of a candidate doing `candidate_products` a step, under load, expecting
// `expected` of each; prints each trial's interval and returns how many trials gave each verdict.
std::map<std::string, int> verdicts_of_trials(int candidate_products, const std::string& expected) {
  const BusyCore load;
  Workload workload;
  SpeedTestOptions options;
  options.threshold = 1 - GateThresholds{}.max_throughput_drop;
  std::map<std::string, int> verdicts;
  for (int trial = 0; trial < trials(); ++trial) {
    std::vector<StepTimes> baseline, candidate;
    SpeedInterval interval;
    do {
      // A B, B A, A B, ...: the second run of a pair measured up to 1.2% slower here, and the
      // alternation cancels that.
      for (int added = 0; added < kPairs; ++added) {
        if (baseline.size() % 2 == 0) {
          baseline.push_back(workload.timed_run(kBaselineProducts));
          candidate.push_back(workload.timed_run(candidate_products));
        } else {
          candidate.push_back(workload.timed_run(candidate_products));
          baseline.push_back(workload.timed_run(kBaselineProducts));
        }
      }
      interval = judge_speed(baseline, candidate, options);
      std::cout << fmt::format(
          "trial {}, {} pairs: throughput ratio {:.4f}, 95% interval [{:.4f}, {:.4f}]: {}\n",
          trial + 1, baseline.size(), interval.throughput_ratio, interval.low, interval.high,
          interval.verdict);
      EXPECT_TRUE(interval.verdict == expected || interval.verdict == "inconclusive")
          << "trial " << trial + 1 << " after " << baseline.size() << " pairs";
    } while (interval.verdict == "inconclusive" && baseline.size() < kMaxPairs);
    EXPECT_EQ(interval.verdict, expected) << "trial " << trial + 1;
    ++verdicts[interval.verdict];
  }
  // Keeps the products observable, so that the compiler cannot drop them.
  EXPECT_TRUE(std::isfinite(workload.checksum()));
  return verdicts;
}

TEST(SpeedGateUnderLoad, ATenPercentSlowerCandidateFailsEveryTrial) {
  std::map<std::string, int> verdicts = verdicts_of_trials(kSlowerProducts, "fail");
  std::cout << fmt::format("detection rate: {}/{} ({} inconclusive, {} passed)\n", verdicts["fail"],
                           trials(), verdicts["inconclusive"], verdicts["pass"]);
  RecordProperty("detected", verdicts["fail"]);
  RecordProperty("trials", trials());
}

TEST(SpeedGateUnderLoad, AnUnchangedCandidatePassesEveryTrial) {
  std::map<std::string, int> verdicts = verdicts_of_trials(kBaselineProducts, "pass");
  std::cout << fmt::format("false-alarm rate: {}/{} failed ({} inconclusive, {} passed)\n",
                           verdicts["fail"], trials(), verdicts["inconclusive"], verdicts["pass"]);
  RecordProperty("false_alarms", verdicts["fail"]);
  RecordProperty("passed", verdicts["pass"]);
  RecordProperty("trials", trials());
}

}  // namespace
}  // namespace parity::compare
