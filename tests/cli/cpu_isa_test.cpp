// The engine's own kernels have an AVX2 build and an x86-64 baseline build of each loop
// (pmap_engine/src/ops/cpu_isa.h): the fused element-wise loops round every operation on its own
// in both, and XLA's tanh, exp and logistic call std::fma in both (an instruction in one,
// glibc's correctly rounded fmaf in the other). So a training run computes the same bits
// whichever build the CPU picks: an AVX2 machine and one without it train the same engine run.
// PE_CPU_ISA=baseline makes any machine run the baseline builds; each case below trains twice,
// once per build, and every recorded tensor must be identical, byte for byte.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "command.h"
#include "parity/common/run_dir.h"
#include "test_files.h"

namespace parity {
namespace {

// `parity pmap CASE` with `overrides`, under `environment`; the run directory.
std::filesystem::path train(const testing::TempDir& dir, const std::string& case_name,
                            const std::string& overrides, const std::string& environment,
                            const std::string& label) {
  const std::filesystem::path run = dir.path(label);
  const std::string init = dir.path("init.safetensors").string();
  if (!std::filesystem::exists(init)) {
    const testing::CommandResult made = testing::run_command(
        fmt::format("{} init {} {} --out {}", PARITY_EXECUTABLE, case_name, overrides, init), 60);
    EXPECT_EQ(made.exit_code, 0) << made.output;
  }
  const testing::CommandResult trained = testing::run_command(
      fmt::format("{} {} pmap {} {} --init {} --out {} --quiet", environment, PARITY_EXECUTABLE,
                  case_name, overrides, init, testing::shell_quote(run.string())),
      300);
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  return run;
}

void expect_same_tensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  const RunDir run_a = read_run_dir(a);
  const RunDir run_b = read_run_dir(b);
  ASSERT_FALSE(run_a.tensor_steps.empty());
  ASSERT_EQ(run_a.tensor_steps, run_b.tensor_steps);
  ASSERT_EQ(run_a.steps.size(), run_b.steps.size());
  for (size_t i = 0; i < run_a.steps.size(); ++i) {
    EXPECT_EQ(run_a.steps[i].loss, run_b.steps[i].loss) << "step " << run_a.steps[i].step;
  }
  for (const int64_t step : run_a.tensor_steps) {
    const NamedTensors from_a = read_step_tensors(a, step);
    const NamedTensors from_b = read_step_tensors(b, step);
    ASSERT_EQ(from_a.size(), from_b.size()) << "step " << step;
    for (const auto& [name, tensor] : from_a) {
      const auto found = from_b.find(name);
      ASSERT_NE(found, from_b.end()) << name;
      ASSERT_EQ(tensor.shape, found->second.shape) << name;
      EXPECT_EQ(std::memcmp(tensor.bytes.data(), found->second.bytes.data(), tensor.num_bytes()),
                0)
          << "step " << step << " " << name << " differs between the engine's builds";
    }
  }
}

void expect_builds_agree(const std::string& case_name, const std::string& overrides) {
  testing::TempDir dir;
  const auto native = train(dir, case_name, overrides, "PE_CPU_ISA=native", "native");
  const auto baseline = train(dir, case_name, overrides, "PE_CPU_ISA=baseline", "baseline");
  expect_same_tensors(native, baseline);
}

// tanh (XLA's approximation) and the fused Adam update of an MLP.
TEST(EngineCpuIsa, BaselineBuildTrainsMlp2FmnistBitForBit) {
  expect_builds_agree("mlp2-fmnist",
                      "--set train.steps=3 --set 'train.record_steps=[0, 2]' "
                      "--set data.per_replica_batch=16");
}

// exp (softmax), GELU, LayerNorm and AdamW of a ViT.
TEST(EngineCpuIsa, BaselineBuildTrainsVitFmnistBitForBit) {
  expect_builds_agree("vit-fmnist",
                      "--set train.steps=2 --set 'train.record_steps=[0, 1]' "
                      "--set data.per_replica_batch=4 --set parallel.replicas=2");
}

}  // namespace
}  // namespace parity
