// The result of comparing two run directories: the contract between compare (which fills it)
// and reports (which renders it, and depends on nothing else of compare's).
//
// Vocabulary:
//   run A / run B   the two run directories in the order given; B is the reference where a
//                   relative error needs one (usually ddp_ref), A the run under test.
//   check           one named judgement with its figures (loss curve, gradients, ...).
//   not recorded    a check whose inputs neither run recorded: reported, never passed off as a
//                   pass (status kNotRecorded).
//   diagnosis       a rule that matched the failed checks' symptoms, naming a pitfall of the
//                   catalogue (docs/pitfalls.md: P2, P4, ...) with its evidence and the fix.
//   series          per-step values the reports chart.
//   seed sets       a comparison over seeds (parity run --seeds, parity compare --seeds): N runs
//                   per producer that differ only in their seeds, judged by the distributions of
//                   their final values (seed_distributions), not step by step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace parity::compare {

inline constexpr int kReportSchemaVersion = 1;

enum class CheckStatus { kPass, kFail, kWarn, kNotRecorded };
// kInconclusive: a comparison over seeds whose samples are too small to tell equivalence from a
// difference (the report says how many seeds would).
enum class Verdict { kEquivalent, kNotEquivalent, kIncomplete, kInconclusive };

// "pass", "fail", "warn", "not recorded"; "equivalent", "not equivalent", "incomplete".
// Inline, so that reports (which depends on these types only, not on compare's library) speaks
// the same words.
inline const char* to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kNotRecorded:
      return "not recorded";
  }
  return "unknown";
}

inline const char* to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kEquivalent:
      return "equivalent";
    case Verdict::kNotEquivalent:
      return "not equivalent";
    case Verdict::kIncomplete:
      return "incomplete";
    case Verdict::kInconclusive:
      return "inconclusive";
  }
  return "unknown";
}
// The verdict in the checks' tones, for colours and icons: equivalent like a pass, not
// equivalent like a failure, incomplete and inconclusive like a warning.
inline CheckStatus verdict_tone(Verdict verdict) {
  switch (verdict) {
    case Verdict::kEquivalent:
      return CheckStatus::kPass;
    case Verdict::kNotEquivalent:
      return CheckStatus::kFail;
    case Verdict::kIncomplete:
    case Verdict::kInconclusive:
      return CheckStatus::kWarn;
  }
  return CheckStatus::kWarn;
}

// The CLI's exit code for a verdict: 0 equivalent, 1 not equivalent, 3 a run is incomplete,
// 5 inconclusive (2 is bad input, 4 an internal error).
int exit_code(Verdict verdict);

// One number a check reports, e.g. {"max_abs_error", 3.1e-6, ""} or {"ratio", 8.0, "x"}.
struct Figure {
  std::string name;
  double value = 0;
  std::string unit;  // "", "s", "bytes", "samples/s", "x"
};

// One tensor compared at one recorded step (gradients or parameters).
struct TensorDelta {
  int64_t step = 0;
  std::string name;  // canonical model name, e.g. "layers.0.weight"
  double max_abs = 0;
  double rel_l2 = 0;  // ||a - b|| / ||b||
  double cosine = 1;
  double norm_ratio = 1;  // ||a|| / ||b||
  bool within_tolerance = true;
  // False for a parameter whose gradient the oracle finds zero (gradient_signal.h): its
  // tensors are listed, not judged.
  bool gradient_signal = true;
};

struct Check {
  std::string id;     // loss_curve, gradients, parameters, oracle, replicas, data, rng,
                      // throughput, memory
  std::string title;  // "Loss curve", ...
  CheckStatus status = CheckStatus::kNotRecorded;
  std::string summary;  // one sentence with the key figure
  std::vector<Figure> figures;
  std::optional<int64_t> first_failing_step;
  std::vector<std::string> details;  // further lines, worst first
  std::vector<TensorDelta> tensors;  // gradients / parameters checks: worst first
};

struct Diagnosis {
  std::string pitfall;   // catalogue id: "P2", "P4", ...
  std::string title;     // "Gradients summed, not averaged"
  std::string evidence;  // the figures that matched, in a sentence
  std::string fix;       // what to change in the user's code
};

// What the reports show of each run.
struct RunSummary {
  std::string label;  // "A" / "B"
  std::string dir;
  std::string producer;
  std::string status;
  std::string case_name;
  std::string case_hash;
  int64_t replicas = 0;
  int64_t processes = 0;
  std::string parallel_style;  // "ddp", "pmap", "jit-dp", "jit-fsdp"; empty when not recorded
  std::string dtype;
  std::string optimizer;
  std::string host;
  std::string started_at;
  std::map<std::string, std::string> versions;
  int64_t steps = 0;
  double first_step_seconds = 0;
  double step_median_seconds = 0;
  double step_spread_seconds = 0;
  double samples_per_second = 0;
  std::vector<int64_t> peak_bytes_per_replica;
  std::string memory_method;
  // What each replica holds between steps (run.json memory; empty when not recorded).
  std::vector<int64_t> param_bytes_per_replica;
  std::vector<int64_t> optimizer_state_bytes_per_replica;
  std::string state_layout;
  // The run's end results as run.json records them: final_loss, and test_loss and
  // test_accuracy when the run evaluated (the only figures a BatchNorm's running statistics
  // reach: M2).
  std::map<std::string, double> results;
};

// Per-step values for charts; every vector has one entry per entry of `steps`.
struct StepSeries {
  std::vector<int64_t> steps;
  std::vector<double> loss_a, loss_b;
  std::vector<double> loss_abs_diff;    // |a - b|
  std::vector<double> loss_tolerance;   // atol + rtol * |b| at that step
  std::vector<double> grad_norm_ratio;  // grad_norm a / grad_norm b
  // Largest spread of replica losses within each run (max - min), 0 when not recorded.
  std::vector<double> replica_spread_a, replica_spread_b;
};

struct Tolerance {
  double rtol = 0;
  double atol = 0;
  int64_t allowed_bad_steps = 0;  // the approximate lane for long runs
  std::string source;  // e.g. "float32 defaults (torch.testing.assert_close: rtol 1.3e-6, ...)"
};

// One final value (test loss, test accuracy) of every seed's run of each producer, and the
// two-sided equivalence test of their means (compare/seed_equivalence.h); the check of the same
// id ("seeds_" + metric) carries the test's figures.
struct SeedDistribution {
  std::string metric;  // "test_loss", "test_accuracy", "final_loss"
  std::string title;   // "Test loss"
  std::vector<std::string> seeds_a, seeds_b;  // each run's label (its folder's name)
  std::vector<double> values_a, values_b;
  double mean_a = 0, mean_b = 0;
  double margin = 0;  // equivalent when the interval lies inside (-margin, margin)
  double confidence = 0.9;  // of the interval: 1 - 2 alpha
  double interval_low = 0, interval_high = 0;  // of mean_a - mean_b
  std::string verdict;  // "equivalent", "different", "inconclusive"
};

// The gate's throughput verdict on a noisy machine (compare/speed_verdict.h): the ratio of the
// step times' 10th percentiles, baseline over candidate (the candidate's samples/s over the
// baseline's when both train the same batch), with its bootstrap confidence interval over
// interleaved runs.
struct SpeedInterval {
  double throughput_ratio = 1;  // baseline's step-time q10 / candidate's step-time q10
  double low = 1, high = 1;     // the interval of throughput_ratio
  double confidence = 0.95;     // two-sided
  double threshold = 0.95;      // the candidate fails below this ratio (1 - max drop)
  int64_t pairs = 0;            // interleaved (baseline, candidate) run pairs
  int64_t candidate_steps = 0, baseline_steps = 0;  // steady step times, all runs together
  int64_t block_length = 1;     // steps per resampled block (moving block bootstrap)
  int64_t resamples = 0;
  // "pass" (the interval lies at or above the threshold), "fail" (below it), "inconclusive"
  // (it straddles the threshold: rerun with more repetitions).
  std::string verdict;
};

struct ComparisonResult {
  int schema_version = kReportSchemaVersion;
  Verdict verdict = Verdict::kEquivalent;
  std::string headline;  // one sentence: where they first part and the likely reason
  RunSummary a, b;
  Tolerance loss_tolerance;
  Tolerance tensor_tolerance;
  std::vector<Check> checks;
  std::vector<Diagnosis> diagnoses;
  StepSeries series;
  std::vector<SeedDistribution> seed_distributions;  // a comparison over seeds only
  // The gate's statistical throughput verdict; absent outside the gate and when a run recorded
  // no per-step times (the throughput check then compares the two runs' medians).
  std::optional<SpeedInterval> speed;
  std::string parity_version;
  std::string generated_at;  // ISO 8601 UTC
};

}  // namespace parity::compare
