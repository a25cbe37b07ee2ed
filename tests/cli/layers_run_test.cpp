// `parity run` on the layers cases (issue 16's acceptance), quick variants: cnn-fmnist's ResNet
// and vit-fmnist's ViT, each trained by the engine on 8 devices and by ddp_ref on 8 ranks from
// one flax-initialised file, judged equivalent on every loss, the gradients, the parameters and
// (the ResNet's) BatchNorm running statistics, with the f64 oracle the ResNet's case asks for.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using testing::run_command;
using testing::shell_quote;

const std::string kParity = PARITY_EXECUTABLE;

using Checks = std::map<std::string, nlohmann::json>;

Checks checks_by_id(const nlohmann::json& report) {
  Checks checks;
  for (const nlohmann::json& check : report.at("checks")) checks[check.at("id")] = check;
  return checks;
}

double figure(const Checks& checks, const std::string& check, const std::string& name) {
  const auto found = checks.find(check);
  if (found == checks.end()) {
    ADD_FAILURE() << "no check " << check;
    return -1.0;
  }
  for (const nlohmann::json& entry : found->second.at("figures")) {
    if (entry.at("name") == name) return entry.at("value").get<double>();
  }
  ADD_FAILURE() << check << " has no figure " << name;
  return -1.0;
}

// Runs `command`, a `parity run`, expects it to end equivalent, and returns the report.json at
// `report` (null when the run failed).
nlohmann::json equivalent_report(const std::string& command, const std::filesystem::path& report,
                                 int timeout_seconds) {
  const auto run = run_command(command, timeout_seconds);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("parity: EQUIVALENT"));
  if (run.exit_code != 0) return nullptr;
  nlohmann::json parsed = nlohmann::json::parse(testing::read_bytes(report));
  EXPECT_EQ(parsed.at("verdict"), "equivalent");
  return parsed;
}

// The f32 runs do not agree element for element on every gradient: a BatchNorm's scale and bias
// gradients are sums over the batch of nearly cancelling terms, which f32 gets to a relative
// 1e-3 to 1e-2 whatever the order (measured at step 0: both producers 0.5-0.8% from the f64
// engine on Residual_0/BatchNorm_0/scale). The case asks for the oracle (compare.oracle), which
// judges the recorded tensors: at each step, A's worst distance from the f64 run must stay
// within twice B's, widened by the sampling spread of a small tensor's distance (16 channels:
// 2.3x, tensor_oracle.cpp). `environment` prefixes the command: the verdict must hold on the
// CPU's own kernels and on the AVX2 ones an AMD CPU runs.
void expect_cnn_fmnist_equivalent(const std::string& environment) {
  testing::TempDir out;
  // 3 steps of 8 replicas x 8 samples: BatchNorm over 8 x 28 x 28 values per channel on each
  // replica, statistics recorded after the first and the last step.
  const nlohmann::json report = equivalent_report(
      fmt::format("{}{} run cnn-fmnist --set train.steps=3 --set data.per_replica_batch=8 "
                  "--set 'train.record_steps=[0, 2]' --out {}",
                  environment, kParity, shell_quote(out.path().string())),
      out.path("cnn-fmnist/report/report.json"), 900);
  ASSERT_FALSE(report.is_null());
  const auto checks = checks_by_id(report);
  ASSERT_EQ(checks.count("model_state"), 1u) << report.dump(2);
  ASSERT_EQ(checks.count("oracle"), 1u) << report.dump(2);
  EXPECT_EQ(checks.at("oracle").at("status"), "pass") << checks.at("oracle").dump(2);
  // 10 BatchNorm layers x (mean, var) at 2 steps.
  EXPECT_EQ(figure(checks, "model_state", "tensors_compared"), 40);
  // 32 gradients, 32 parameters and 20 statistics at 2 steps, each judged against the oracle.
  EXPECT_EQ(figure(checks, "oracle", "tensors_judged"), 168);
  EXPECT_EQ(figure(checks, "oracle", "groups_beyond_oracle_band"), 0);
  // The producers evaluate on the test split; the oracle, read for its losses and tensors only,
  // does not.
  const auto results = [&](const char* run) {
    return nlohmann::json::parse(
               testing::read_bytes(out.path(std::string("cnn-fmnist/") + run + "/run.json")))
        .at("results");
  };
  EXPECT_TRUE(results("ddp").contains("test_loss"));
  EXPECT_TRUE(results("pmap").contains("test_loss"));
  EXPECT_FALSE(results("oracle").contains("test_loss"));
}

TEST(CliRunLayers, CnnFmnistEngineAndDdpAreEquivalentBatchNormStatisticsIncluded) {
  expect_cnn_fmnist_equivalent("");
}

// OpenBLAS's Haswell kernels (an AMD CPU's), oneDNN's AVX2 convolutions and ATen's AVX2 kernels
// on any CPU.
TEST(CliRunLayers, CnnFmnistIsEquivalentOnTheAvx2Kernels) {
  expect_cnn_fmnist_equivalent(
      "OPENBLAS_CORETYPE=Haswell DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 ");
}

// Every attention's key bias parts: its gradient is zero in exact arithmetic (it adds q . b_k to
// every score in a query's row, which the softmax takes away), so each producer's f32 gradient
// is its own rounding noise (about 3e-10, within the gradient tolerance), and AdamW's first
// steps, lr * g / (sqrt(v) + eps), turn it into lr * g / eps, 3e-5 per step and up to 1e-4 for
// some elements: beyond the parameter tolerance from the first update on, while the f64
// oracle's key biases stay near 1e-13. The case asks for the oracle (compare.oracle), whose
// gradients find the key biases without gradient signal (below 2^-24 of the largest at both
// recorded steps, compare/src/gradient_signal.h): they are listed, not judged, on any CPU;
// every other tensor agrees within the f32 tolerance.
// Residuals whose layers hold no parameters (x + relu(x), and one nested in another): Flax
// names them but leaves them out of the params tree (flax/core/scope.py,
// Scope._mutable_collection), and both producers train the model from one init file.
TEST(CliRunLayers, ResidualsWithoutParametersTrainEquivalentlyOnBothProducers) {
  testing::TempDir dir;
  testing::write_bytes(dir.path("residual-relu.toml"), R"([model]
input = [784]
loss = "softmax_cross_entropy"
layers = [
  { kind = "dense", features = 32 },
  { kind = "residual", layers = [{ kind = "relu" }] },
  { kind = "residual", layers = [{ kind = "residual", layers = [{ kind = "tanh" }] }] },
  { kind = "dense", features = 10 },
]
[parallel]
replicas = 2
[train]
steps = 3
record_steps = [0, 2]
[init]
scheme = "flax"
)");
  const nlohmann::json report =
      equivalent_report(fmt::format("{} run {} --out {}", kParity,
                                    shell_quote(dir.path("residual-relu.toml").string()),
                                    shell_quote(dir.path("out").string())),
                        dir.path("out/residual-relu/report/report.json"), 600);
  ASSERT_FALSE(report.is_null());
  // Dense_0 and Dense_1, a kernel and a bias each, at 2 steps.
  EXPECT_EQ(figure(checks_by_id(report), "parameters", "tensors_compared"), 8);
}

TEST(CliRunLayers, VitFmnistEngineAndDdpAreEquivalent) {
  testing::TempDir out;
  // 3 steps of 8 replicas x 8 samples, tensors recorded after the first and the last step.
  const auto run = run_command(
      fmt::format("{} run vit-fmnist --set train.steps=3 --set data.per_replica_batch=8 "
                  "--set 'train.record_steps=[0, 2]' --out {}",
                  kParity, shell_quote(out.path().string())),
      600);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("parity: EQUIVALENT"));
  const nlohmann::json report =
      nlohmann::json::parse(testing::read_bytes(out.path("vit-fmnist/report/report.json")));
  EXPECT_EQ(report.at("verdict"), "equivalent");
  const Checks checks = checks_by_id(report);
  ASSERT_EQ(checks.count("oracle"), 1u) << report.dump(2);
  EXPECT_EQ(checks.at("oracle").at("status"), "pass") << checks.at("oracle").dump(2);
  // 39 parameters: the patch embedding's kernel and bias (2), the position embeddings (1), two
  // blocks of a LayerNorm (2) and attention (query, key, value and out, a kernel and a bias
  // each: 8), two of a LayerNorm (2) and an MLP (two dense layers: 4), the final LayerNorm (2)
  // and the head (2): 2 + 1 + 2 * (10 + 6) + 2 + 2. At 2 steps: 78 of each. The two key
  // biases have no gradient signal: 2 gradients and 2 parameters at each of 2 steps are left
  // out, and the oracle judges the other 156 - 8 = 148.
  EXPECT_EQ(figure(checks, "gradients", "tensors_compared"), 78);
  EXPECT_EQ(figure(checks, "gradients", "tensors_out_of_tolerance"), 0);
  EXPECT_EQ(figure(checks, "gradients", "tensors_without_gradient_signal"), 4);
  EXPECT_EQ(figure(checks, "parameters", "tensors_compared"), 78);
  EXPECT_EQ(figure(checks, "parameters", "tensors_out_of_tolerance"), 0);
  EXPECT_EQ(figure(checks, "parameters", "tensors_without_gradient_signal"), 4);
  EXPECT_EQ(figure(checks, "oracle", "tensors_judged"), 148);
  EXPECT_EQ(figure(checks, "oracle", "tensors_without_gradient_signal"), 8);
  EXPECT_EQ(figure(checks, "oracle", "groups_beyond_oracle_band"), 0);
  for (const nlohmann::json& tensor : checks.at("parameters").at("tensors")) {
    if (tensor.at("gradient_signal").get<bool>()) continue;
    EXPECT_THAT(tensor.at("name").get<std::string>(), ::testing::EndsWith("/key/bias"))
        << tensor.dump();
  }
}

// vit-fmnist with dropout 0.1 at 4 sites (after each attention and MLP block), ddp_ref drawing
// from the engine's threefry keys (rng.ddp = "threefry"): both producers drop the same units,
// so the runs stay equivalent step by step and the RNG check finds every mask equal.
TEST(CliRunLayers, VitFmnistDropoutDrawsBitIdenticalMasksOnBothProducers) {
  testing::TempDir out;
  const auto run = run_command(
      fmt::format("{} run vit-fmnist-dropout --set train.steps=3 --set data.per_replica_batch=8 "
                  "--set 'train.record_steps=[0, 2]' --out {}",
                  kParity, shell_quote(out.path().string())),
      600);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("parity: EQUIVALENT"));
  const nlohmann::json report = nlohmann::json::parse(
      testing::read_bytes(out.path("vit-fmnist-dropout/report/report.json")));
  const Checks checks = checks_by_id(report);
  EXPECT_EQ(checks.at("rng").at("status"), "pass") << checks.at("rng").dump(2);
  // 3 steps x 8 replicas x 4 sites, in each run; C(8, 2) replica pairs x 4 sites x 3 steps.
  EXPECT_EQ(figure(checks, "rng", "masks_compared"), 96);
  EXPECT_EQ(figure(checks, "rng", "masks_equal"), 96);
  EXPECT_EQ(figure(checks, "rng", "replica_pairs_compared_a"), 336);
  EXPECT_EQ(figure(checks, "rng", "identical_replica_masks_a"), 0);
  EXPECT_EQ(figure(checks, "rng", "repeated_masks_b"), 0);
  // Every recorded key is the one the case's [rng] derives, in both producers.
  EXPECT_EQ(figure(checks, "rng", "keys_recomputed_a"), 96);
  EXPECT_EQ(figure(checks, "rng", "key_mismatches_a"), 0);
  EXPECT_EQ(figure(checks, "rng", "key_mismatches_b"), 0);
}

}  // namespace
}  // namespace parity
