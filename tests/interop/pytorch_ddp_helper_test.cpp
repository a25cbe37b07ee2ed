// A real PyTorch DDP run, logged with interop/python/parity_torch_log.py, gated against ddp_ref:
// interop/python/examples/train_mlp2_ddp.py trains mlp2-fmnist on 2 gloo processes with
// torch.nn.parallel.DistributedDataParallel, DistributedSampler and torch.optim.Adam (Debian's
// python3-torch 1.13.1) from `parity init`'s parameters; `parity import metrics` and `parity
// import tensors` make its log a run directory (the tensors mapped from torch's names and layouts
// onto the canonical ones), and `parity compare` judges it against `parity ddp` on the same case.
//
// Expected values and where they come from: the comparison must say equivalent (issue 7's
// acceptance). Beyond that, the two runs are bit-identical, which this test asserts: python3-torch
// and libtorch-dev are one build of libtorch 1.13.1, so the same kernels run on the same inputs in
// the same order (same init file, same sample ids, the same c10d Reducer averaging over gloo, the
// same Adam arithmetic). Measured on the development machine: every loss, per-rank loss, gradient
// and parameter norm of all 200 steps and every tensor at steps 0 and 199 equal bit for bit. One
// condition: both sides must run OpenBLAS with the same thread count, since OpenBLAS's own thread
// pool (not pinned by at::set_num_threads) changes the gradients' last bits; the test pins it to
// 1 for both. Without the pin, on 2 cores, the runs still agree bit for bit (both use 2 threads);
// a PyTorch run pinned to 1 against a ddp_ref run left at 2 differs by at most 8.9e-8 in the loss
// (step 41), inside the f32 tolerance.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "python_helper_support.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSteps = 200;  // cases/mlp2-fmnist.toml: train.steps
constexpr const char* kOverrides = "--set parallel.replicas=2";
// OpenBLAS reads OPENBLAS_NUM_THREADS when it loads (see the file comment).
constexpr const char* kPinnedBlas = "OPENBLAS_NUM_THREADS=1 ";

testing::CommandResult run_checked(const std::string& command, int timeout_seconds) {
  testing::CommandResult result = testing::run_command(command, timeout_seconds);
  EXPECT_EQ(result.exit_code, 0) << command << "\n" << result.output;
  return result;
}

// The real PyTorch run of mlp2-fmnist with `overrides`, imported, and ddp_ref's run of the same
// case from the same init file, under `dir`.
struct TorchAndDdp {
  std::string log, imported, ddp;
};

TorchAndDdp run_torch_and_ddp(const testing::TempDir& dir, const std::string& overrides) {
  const std::string parity = PARITY_EXECUTABLE;
  const std::string init = dir.path("init.safetensors").string();
  const TorchAndDdp runs{dir.path("torch-log").string(), dir.path("torch-run").string(),
                         dir.path("ddp-run").string()};
  run_checked(fmt::format("{} init mlp2-fmnist {} --out {}", parity, overrides, init), 60);
  // The real PyTorch run: 2 processes, started and awaited (with a deadline) by the script.
  // Alone it takes well under a minute; in a full `make test` on 2 cores it once ran past a
  // 240 s deadline (2026-12-05, cause not found), so the deadline only guards against a hang.
  run_checked(
      fmt::format("{}{} {} {} --init {} --out {} --quiet --timeout 60 --deadline 600", kPinnedBlas,
                  testing::shell_quote(testing::python_executable()),
                  (testing::python_helpers_dir() / "examples" / "train_mlp2_ddp.py").string(),
                  overrides, init, runs.log),
      660);
  run_checked(
      fmt::format("{} import metrics {}/metrics.jsonl --case mlp2-fmnist {} --map loss=loss "
                  "--map grad_norm=grad_norm --map param_norm=param_norm --map lr=lr "
                  "--out {}",
                  parity, runs.log, overrides, runs.imported),
      60);
  run_checked(fmt::format("{} import tensors {}/tensors --case mlp2-fmnist {} --out {}", parity,
                          runs.log, overrides, runs.imported),
              60);
  run_checked(fmt::format("{}{} ddp mlp2-fmnist {} --init {} --out {} --quiet", kPinnedBlas, parity,
                          overrides, init, runs.ddp),
              300);
  return runs;
}

TEST(PytorchDdpHelper, RealTorchDdpRunOfMlp2FmnistImportsEquivalentToDdpRef) {
  ASSERT_TRUE(testing::python_has_module("torch"))
      << testing::python_executable()
      << " cannot import torch; install python3-torch (scripts/install-deps.sh) or "
         "point PARITY_PYTHON at an interpreter that has it";
  testing::TempDir dir;
  const std::string parity = PARITY_EXECUTABLE;
  const TorchAndDdp runs = run_torch_and_ddp(dir, kOverrides);
  const std::string& log = runs.log;
  const std::string& imported = runs.imported;
  const std::string& ddp = runs.ddp;

  const testing::CommandResult verdict =
      testing::run_command(fmt::format("{} compare {} {} --no-color", parity, imported, ddp), 120);
  EXPECT_EQ(verdict.exit_code, 0) << verdict.output;
  EXPECT_THAT(verdict.output, HasSubstr("parity: EQUIVALENT"));
  EXPECT_THAT(verdict.output, HasSubstr(fmt::format("agree on all {} steps compared", kSteps)));
  EXPECT_THAT(verdict.output,
              HasSubstr(fmt::format("All {} steps within tolerance; worst |A - B| 0 ", kSteps)));
  // Gradients and parameters at the record steps 0 and 199 (4 tensors each), mapped from
  // torch's names and layouts by `parity import tensors`.
  EXPECT_THAT(verdict.output, HasSubstr("All 8 gradient tensors within tolerance at steps 0, 199; "
                                        "worst rel L2 0, max |A - B| 0."));
  EXPECT_THAT(verdict.output, HasSubstr("All 8 parameter tensors within tolerance at steps 0, 199; "
                                        "worst rel L2 0, max |A - B| 0."));

  // The imported run: every step, the case ddp_ref trained, and the metrics bit for bit.
  const RunDir torch_run = read_run_dir(imported);
  const RunDir ddp_run = read_run_dir(ddp);
  EXPECT_EQ(torch_run.info.producer, "import:jsonl");
  EXPECT_EQ(torch_run.info.case_hash, ddp_run.info.case_hash);
  ASSERT_EQ(torch_run.steps.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(ddp_run.steps.size(), static_cast<size_t>(kSteps));
  for (int64_t step = 0; step < kSteps; ++step) {
    const StepMetrics& a = torch_run.steps[static_cast<size_t>(step)];
    const StepMetrics& b = ddp_run.steps[static_cast<size_t>(step)];
    ASSERT_EQ(a.step, step);
    EXPECT_EQ(a.loss, b.loss) << "step " << step;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
    EXPECT_EQ(a.param_norm, b.param_norm) << "step " << step;
    EXPECT_EQ(a.lr, b.lr) << "step " << step;
  }

  // Per-rank losses and the sample digests, computed in Python from the ids the real
  // DistributedSampler gave each rank's DataLoader, carried by the import: equal to ddp_ref's
  // (its port of the sampler and digest.cpp's digests), so compare's data check passes.
  EXPECT_THAT(verdict.output,
              HasSubstr(fmt::format("Same global sample ids at all {} steps compared", kSteps)));
  for (size_t step = 0; step < torch_run.steps.size(); ++step) {
    const StepMetrics& a = torch_run.steps[step];
    const StepMetrics& b = ddp_run.steps[step];
    EXPECT_EQ(a.replica_losses, b.replica_losses) << "step " << step;
    EXPECT_EQ(a.samples_digest, b.samples_digest) << "step " << step;
    EXPECT_EQ(a.samples_set_digest, b.samples_set_digest) << "step " << step;
    EXPECT_EQ(a.duplicate_samples, b.duplicate_samples) << "step " << step;
  }

  // The tensor files as the helper wrote them, at the case's record steps [0, -1]: torch's
  // names (nn.Sequential: Linear 0, Tanh 1, Linear 2) and layout (weight (out, in)).
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(log + "/tensors")) {
    files.insert(entry.path().filename().string());
  }
  EXPECT_EQ(files, (std::set<std::string>{"step_000000.safetensors", "step_000199.safetensors"}));
  for (const int64_t step : {int64_t{0}, kSteps - 1}) {
    SCOPED_TRACE("step " + std::to_string(step));
    const SafetensorsFile file =
        read_safetensors(fmt::format("{}/tensors/step_{:06d}.safetensors", log, step));
    EXPECT_EQ(file.metadata.at("naming"), "torch");
    EXPECT_EQ(file.metadata.at("producer"), "parity_torch_log");
    std::map<std::string, Shape> shapes;
    for (const auto& [name, tensor] : file.tensors) shapes[name] = tensor.shape;
    const std::map<std::string, Shape> expected = {
        {"params/0.weight", {256, 784}}, {"params/0.bias", {256}},
        {"params/2.weight", {10, 256}},  {"params/2.bias", {10}},
        {"grads/0.weight", {256, 784}},  {"grads/0.bias", {256}},
        {"grads/2.weight", {10, 256}},   {"grads/2.bias", {10}}};
    EXPECT_EQ(shapes, expected);
  }
}

// torch's CrossEntropyLoss(label_smoothing=0.1) in a real DDP run is ddp_ref's label-smoothed loss
// bit for bit (LibTorch's cross_entropy(label_smoothing), the same kernels): the uniform form of
// model.label_smoothing is PyTorch's own.
TEST(PytorchDdpHelper, LabelSmoothedRealTorchDdpRunIsDdpRefsBitForBit) {
  ASSERT_TRUE(testing::python_has_module("torch")) << testing::python_executable();
  testing::TempDir dir;
  const TorchAndDdp runs = run_torch_and_ddp(
      dir, std::string(kOverrides) +
               " --set model.label_smoothing=0.1 --set train.steps=10 --set 'train.record_steps=[0]'");
  const testing::CommandResult verdict = testing::run_command(
      fmt::format("{} compare {} {} --no-color", PARITY_EXECUTABLE, runs.imported, runs.ddp), 120);
  EXPECT_EQ(verdict.exit_code, 0) << verdict.output;
  EXPECT_THAT(verdict.output, HasSubstr("All 10 steps within tolerance; worst |A - B| 0 "));
  EXPECT_THAT(verdict.output, HasSubstr("All 4 gradient tensors within tolerance at steps 0; "
                                        "worst rel L2 0, max |A - B| 0."));
  // Both trained the smoothed case (the script reads model.label_smoothing as ddp_ref does):
  // smoothing moves the first step's gradients by about eps of them, so bit-identical gradients
  // mean both smoothed.
  EXPECT_EQ(read_run_dir(runs.imported).info.case_hash, read_run_dir(runs.ddp).info.case_hash);
  EXPECT_NE(read_run_dir(runs.ddp).info.case_hash, load_case("mlp2-fmnist").hash());
}

}  // namespace
}  // namespace parity
