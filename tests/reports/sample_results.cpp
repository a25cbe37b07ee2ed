#include "sample_results.h"

#include <cmath>
#include <limits>

namespace parity::testing {
namespace {

using compare::Check;
using compare::CheckStatus;
using compare::ComparisonResult;

constexpr int64_t kSteps = 200;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A Fashion-MNIST-like loss curve with a little deterministic wiggle.
double reference_loss(int64_t step) {
  const auto s = static_cast<double>(step);
  return 0.45 + 1.85 * std::exp(-s / 45.0) + 0.02 * std::sin(s * 0.7);
}

compare::RunSummary run(const std::string& label, const std::string& producer) {
  compare::RunSummary summary;
  summary.label = label;
  summary.dir = "runs/mlp2-fmnist/" + producer + "-2026-12-02T164130Z";
  summary.producer = producer;
  summary.status = "complete";
  summary.case_name = "mlp2-fmnist";
  summary.case_hash = "9f2c1e07a4b3d5c8";
  summary.replicas = 8;
  summary.processes = 1;
  summary.dtype = "float32";
  summary.optimizer = "adam";
  summary.host = "ci-runner-3";
  summary.started_at = "2026-12-02T16:41:30Z";
  summary.versions = {{"parity", "0.1.0"}, {"openblas", "0.3.21"}};
  if (producer == "ddp_ref") summary.versions["libtorch"] = "1.13.1";
  summary.steps = kSteps;
  summary.first_step_seconds = producer == "ddp_ref" ? 0.0879 : 0.412;
  summary.step_median_seconds = producer == "ddp_ref" ? 0.06641 : 0.05182;
  summary.step_spread_seconds = producer == "ddp_ref" ? 0.02515 : 0.00411;
  summary.samples_per_second = 8 * 64 / summary.step_median_seconds;
  for (int64_t replica = 0; replica < 8; ++replica) {
    const int64_t base = producer == "ddp_ref" ? 7'200'000 : 5'100'000;
    summary.peak_bytes_per_replica.push_back(base + replica * 24'576);
  }
  summary.memory_method = producer == "ddp_ref" ? "LibTorch CPU allocator, per rank thread"
                                                : "executor liveness plan, per device";
  // mlp2-fmnist's 203,530 f32 parameters and Adam's two moments: whole on a DDP rank, in eight
  // blocks under jit-fsdp (dense1.bias, 10 long, replicated).
  const bool ddp = producer == "ddp_ref";
  summary.parallel_style = ddp ? "ddp" : "jit-fsdp";
  summary.param_bytes_per_replica.assign(8, ddp ? 814'120 : 101'800);
  summary.optimizer_state_bytes_per_replica.assign(8, ddp ? 1'628'240 : 203'604);
  summary.state_layout = ddp ? "DDP: a full copy on every rank"
                             : "jit-fsdp over 8 devices: 3 of 4 parameter leaves split; uneven "
                               "leaves replicated (no dimension divides by 8): dense1.bias [10]";
  return summary;
}

compare::Tolerance loss_tolerance() {
  return {1.3e-6, 1e-5, 0, "float32 defaults (torch.testing.assert_close: rtol 1.3e-6, atol 1e-5)"};
}

Check check(std::string id, std::string title, CheckStatus status, std::string summary) {
  Check result;
  result.id = std::move(id);
  result.title = std::move(title);
  result.status = status;
  result.summary = std::move(summary);
  return result;
}

// Series for 200 steps; `diverging` makes A the P2 run.
compare::StepSeries series(bool diverging) {
  compare::StepSeries series;
  for (int64_t step = 1; step <= kSteps; ++step) {
    const double b = reference_loss(step);
    double a = b + 3e-8 * std::sin(static_cast<double>(step));
    double ratio = 1 + 2e-7 * std::cos(static_cast<double>(step));
    if (diverging) {
      // 8x the gradient: faster at first, then unstable, then NaN.
      const auto s = static_cast<double>(step);
      a = step >= 150 ? kNaN : 0.45 + 1.85 * std::exp(-s / 12.0) + 0.004 * std::exp(s / 22.0);
      ratio = step == 149 ? kInf : step >= 150 ? kNaN : 8.0;
    }
    series.steps.push_back(step);
    series.loss_a.push_back(a);
    series.loss_b.push_back(b);
    series.loss_abs_diff.push_back(step == 1 && !diverging ? 0.0 : std::fabs(a - b));
    series.loss_tolerance.push_back(1e-5 + 1.3e-6 * std::fabs(b));
    series.grad_norm_ratio.push_back(ratio);
    series.replica_spread_a.push_back(diverging && step >= 150 ? kNaN : 0.12 * b);
    series.replica_spread_b.push_back(0.12 * b + 1e-4);
  }
  return series;
}

ComparisonResult common_result() {
  ComparisonResult result;
  result.a = run("A", "pmap_engine");
  result.b = run("B", "ddp_ref");
  result.loss_tolerance = loss_tolerance();
  result.tensor_tolerance = {1.3e-6, 1e-5, 0, "float32 defaults"};
  result.parity_version = "0.1.0";
  result.generated_at = "2026-12-02T16:45:02Z";
  return result;
}

}  // namespace

ComparisonResult passing_result() {
  ComparisonResult result = common_result();
  result.verdict = compare::Verdict::kEquivalent;
  result.headline = "The runs agree at all 200 steps: losses within 1e-7, gradients within 2e-7.";
  Check loss = check("loss_curve", "Loss curve", CheckStatus::kPass,
                     "All 200 steps within tolerance; largest |Δloss| 3e-8.");
  loss.figures = {{"max_abs_error", 3e-8, ""}, {"bad_steps", 0, ""}};
  Check gradients = check("gradients", "Gradients", CheckStatus::kPass,
                          "Gradient norms agree within 2e-7 at every recorded step.");
  gradients.figures = {{"norm_ratio", 1.0000002, "x"}, {"max_rel_l2", 4.1e-7, ""}};
  Check throughput = check("throughput", "Throughput", CheckStatus::kPass,
                           "A runs at 1.28× B's samples per second.");
  throughput.figures = {{"samples_per_second_a", result.a.samples_per_second, "samples/s"},
                        {"step_median_a", result.a.step_median_seconds, "s"}};
  Check memory = check("memory", "Memory", CheckStatus::kPass, "A peaks at 0.71× B's memory.");
  memory.figures = {{"peak_bytes_a", 5'272'064, "bytes"}};
  result.checks = {loss, gradients, throughput, memory};
  result.series = series(false);
  return result;
}

ComparisonResult failing_result() {
  ComparisonResult result = common_result();
  result.verdict = compare::Verdict::kNotEquivalent;
  result.headline =
      "The runs part at step 1: A's gradients are 8× B's (summed over 8 devices, not "
      "averaged), and A's loss is NaN from step 150.";
  result.a.optimizer = result.b.optimizer = "sgd";
  result.a.dir = "runs/" + kScript + "/" + kPipe;
  result.a.host = kAmpersand + kControl;
  result.b.host = kTerminalEscape + kInvalidUtf8;
  result.a.versions[kScript] = kCdataEnd;

  Check loss = check("loss_curve", "Loss curve", CheckStatus::kFail,
                     "Loss differs beyond tolerance from step 1; A is NaN from step 150.");
  loss.figures = {{"max_abs_error", 0.8412, ""},
                  {"bad_steps", 200, ""},
                  {"first_nan_step", 150, ""},
                  {"nan_value", kNaN, ""}};
  loss.first_failing_step = 1;
  loss.details = {"step 150: loss A is NaN, loss B 0.4797",
                  "step 149: |Δloss| 0.8412 > tolerance 1.06e-5",
                  "hostile: " + kScript + " " + kPipe + " " + kCdataEnd + " " + kAmpersand + " " +
                      kControl + " " + kMarkdown,
                  "multi\nline detail"};

  Check gradients = check("gradients", "Gradients", CheckStatus::kFail,
                          "Gradient norms are 8.00× B's at every recorded step " + kPipe + ".");
  gradients.figures = {{"norm_ratio", 8.0, "x"}, {"max_rel_l2", 7.0, ""}, {"cosine_min", 1.0, ""}};
  gradients.first_failing_step = 1;
  gradients.tensors = {
      {1, "layers.0.weight", 0.0731, 7.0, 1.0, 8.0, false},
      {1, "layers.0.bias", 0.0112, 7.0, 1.0, 8.0, false},
      {1, kScript, 0.0093, 7.0, 0.9999999, 8.0, false},
      {1, "layers.1.bias", 0.0, 0.0, 1.0, 1.0, true},
  };

  Check parameters = check("parameters", "Parameters", CheckStatus::kFail,
                           "Parameters part from step 1 (rel L2 3.2e-3 after the first update).");
  parameters.figures = {{"max_rel_l2", 3.2e-3, ""}, {"inf_value", kInf, ""}};
  parameters.first_failing_step = 1;
  parameters.tensors = {{1, "layers.0.weight", 0.0073, 3.2e-3, 0.99999, 1.0003, false}};

  Check oracle = check("oracle", "Single-device oracle", CheckStatus::kNotRecorded,
                       "Neither run recorded a single-device reference " + kCdataEnd + ".");
  Check replicas = check("replicas", "Replica agreement", CheckStatus::kPass,
                         "All 8 replicas of each run hold the same parameters at every step.");
  Check data = check("data", "Data order", CheckStatus::kPass,
                     "Both runs read the same sample ids at all 200 steps.");
  Check rng = check("rng", "Random numbers", CheckStatus::kWarn,
                    "B records no RNG keys; dropout masks could not be compared.");
  Check throughput = check("throughput", "Throughput", CheckStatus::kPass,
                           "A runs at 1.28× B's samples per second.");
  throughput.figures = {{"samples_per_second_a", result.a.samples_per_second, "samples/s"}};
  Check memory = check("memory", "Memory", CheckStatus::kPass, "A peaks at 0.71× B's memory.");
  memory.figures = {{"peak_bytes_a", 5'272'064, "bytes"}, {"peak_bytes_b", 7'372'032, "bytes"}};
  result.checks = {loss, gradients, parameters, oracle, replicas, data, rng, throughput, memory};

  result.diagnoses = {{"P2", "Gradients summed, not averaged",
                       "Gradient norms are 8.00× the reference at every step, and 8 is the "
                       "device count " +
                           kAmpersand + ".",
                       "Reduce gradients with pmean(grads, \"data\"), or divide the psum by "
                       "the device count, as DDP averages. " +
                           kScript}};
  result.series = series(true);
  return result;
}

ComparisonResult seeds_result() {
  ComparisonResult result;
  result.verdict = compare::Verdict::kInconclusive;
  result.headline = "Inconclusive over 4 seeds of A and 4 of B: test accuracy crosses its margin.";
  result.a = run("A", "pmap_engine");
  result.b = run("B", "ddp_ref");
  result.a.dir = "parity-out/mlp-fmnist-dropout/seeds/pmap";
  result.b.dir = "parity-out/mlp-fmnist-dropout/seeds/ddp";
  compare::SeedDistribution loss;
  loss.metric = "test_loss";
  loss.title = "Test loss";
  loss.seeds_a = {"seed-0", "seed-1", "seed-2", kScript};
  loss.seeds_b = {"seed-0", "seed-1", "seed-2", "seed-3"};
  loss.values_a = {0.761, 0.772, 0.768, 0.767};
  loss.values_b = {0.765, 0.770, 0.771, 0.766};
  loss.mean_a = 0.767;
  loss.mean_b = 0.768;
  loss.margin = 0.02;
  loss.interval_low = -0.0069;
  loss.interval_high = 0.0066;
  loss.verdict = "equivalent";
  compare::SeedDistribution accuracy = loss;
  accuracy.metric = "test_accuracy";
  accuracy.title = "Test accuracy";
  accuracy.values_a = {0.712, 0.731, 0.702, 0.725};
  accuracy.values_b = {0.720, 0.709, 0.731, 0.716};
  accuracy.mean_a = 0.7175;
  accuracy.mean_b = 0.719;
  accuracy.margin = 0.01;
  accuracy.interval_low = -0.0149;
  accuracy.interval_high = 0.0119;
  accuracy.verdict = "inconclusive";
  result.seed_distributions = {loss, accuracy};
  Check loss_check;
  loss_check.id = "seeds_test_loss";
  loss_check.title = "Test loss over seeds";
  loss_check.status = CheckStatus::kPass;
  loss_check.summary = "Equivalent within ±0.02.";
  loss_check.figures = {{"p_equivalence", 0.0004, ""}, {"seeds_needed", 4, ""}};
  Check accuracy_check = loss_check;
  accuracy_check.id = "seeds_test_accuracy";
  accuracy_check.title = "Test accuracy over seeds";
  accuracy_check.status = CheckStatus::kWarn;
  accuracy_check.summary = "Inconclusive: about 9 seeds per producer would give TOST 80% power.";
  result.checks = {loss_check, accuracy_check};
  result.parity_version = "0.1.0";
  result.generated_at = "2026-12-05T00:40:00Z";
  return result;
}

}  // namespace parity::testing
