// A jit-fsdp run of the engine trainer against ddp_ref's run of the same case, and against the
// pmap run: the same run directory (same files, the style recorded), what each device holds, the
// comparison's verdict and the report's memory figures, all from the runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/compare/compare.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/reports/reports.h"
#include "test_files.h"

namespace parity::engine_trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Every file of a run directory, by its path inside it.
std::set<std::string> files_of(const fs::path& dir) {
  std::set<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files.insert(fs::relative(entry.path(), dir).string());
  }
  return files;
}

struct Runs {
  RunDir ddp, pmap, fsdp;
};

// mlp2-fmnist on 2 devices (ranks) x 32 samples, 5 Adam steps, from one init file.
Runs train_three(const fs::path& dir) {
  const std::vector<std::string> overrides = {"parallel.replicas=2", "data.per_replica_batch=32",
                                              "train.steps=5", "train.record_steps=[0, -1]"};
  const CaseSpec pmap = load_case("mlp2-fmnist", overrides);
  std::vector<std::string> fsdp_overrides = overrides;
  fsdp_overrides.push_back("parallel.style=jit-fsdp");
  const CaseSpec fsdp = load_case("mlp2-fmnist", fsdp_overrides);
  const fs::path init = dir / "init.safetensors";
  write_safetensors(init, init_mlp_params(pmap.model.widths, pmap.init.seed, pmap.init.scale));

  ddp_ref::DdpOptions ddp_options;
  ddp_options.init_file = init;
  ddp_options.out_dir = dir / "ddp";
  ddp_options.quiet = true;
  ddp_ref::train(fsdp, ddp_options);  // ddp_ref trains DDP whatever the style says
  for (const auto& [spec, name] : {std::pair{&pmap, "pmap"}, std::pair{&fsdp, "fsdp"}}) {
    engine_trainer::EngineOptions options;
    options.init_file = init;
    options.out_dir = dir / name;
    options.quiet = true;
    engine_trainer::train(*spec, options);
  }
  return {read_run_dir(dir / "ddp"), read_run_dir(dir / "pmap"), read_run_dir(dir / "fsdp")};
}

TEST(JitStyleRun, FsdpRunMatchesDdpAndRecordsWhatEachDeviceHolds) {
  const testing::TempDir dir;
  const Runs runs = train_three(dir.path());
  ASSERT_EQ(runs.fsdp.info.status, "complete");

  // The run directory a pmap run writes, file for file, with the style recorded.
  EXPECT_EQ(files_of(dir.path("fsdp")), files_of(dir.path("pmap")));
  EXPECT_EQ(runs.fsdp.info.parallel_style, "jit-fsdp");
  EXPECT_EQ(runs.pmap.info.parallel_style, "pmap");
  EXPECT_EQ(runs.ddp.info.parallel_style, "ddp");
  // A jit computes the global batch's loss only.
  EXPECT_TRUE(runs.fsdp.steps.front().replica_losses.empty());

  // What each device holds, [784, 256, 10] on 2 devices: every dimension is even, so every leaf
  // is split on its leading dimension and a device holds half of each:
  //   params (392 x 256 + 128 + 128 x 10 + 5) x 4 bytes = 407,060 of the 814,120 of a copy;
  //   Adam's mu and nu alike, and its step count, one i32 on every device.
  // A DDP rank holds the whole module and its own torch.optim.Adam exp_avg and exp_avg_sq
  // (LibTorch counts steps in an int64_t field, not a tensor); so does a pmap device, with
  // optax's count.
  const MemoryReport& fsdp = runs.fsdp.info.memory;
  EXPECT_EQ(fsdp.param_bytes_per_replica, (std::vector<int64_t>{407060, 407060}));
  EXPECT_EQ(fsdp.optimizer_state_bytes_per_replica,
            (std::vector<int64_t>{2 * 407060 + 4, 2 * 407060 + 4}));
  EXPECT_EQ(fsdp.state_layout, "jit-fsdp over 2 devices: 4 of 4 parameter leaves split");
  EXPECT_EQ(runs.ddp.info.memory.param_bytes_per_replica, (std::vector<int64_t>{814120, 814120}));
  EXPECT_EQ(runs.ddp.info.memory.optimizer_state_bytes_per_replica,
            (std::vector<int64_t>{2 * 814120, 2 * 814120}));
  EXPECT_EQ(runs.pmap.info.memory.param_bytes_per_replica, (std::vector<int64_t>{814120, 814120}));
  EXPECT_EQ(runs.pmap.info.memory.optimizer_state_bytes_per_replica,
            (std::vector<int64_t>{2 * 814120 + 4, 2 * 814120 + 4}));

  // The comparison judges it equivalent and states the memory side by side, from the runs.
  compare::CompareOptions options;
  const compare::ComparisonResult result = compare::compare_runs(runs.fsdp, runs.ddp, options);
  EXPECT_EQ(result.verdict, compare::Verdict::kEquivalent) << result.headline;
  const auto memory =
      std::find_if(result.checks.begin(), result.checks.end(),
                   [](const compare::Check& check) { return check.id == "memory"; });
  ASSERT_NE(memory, result.checks.end());
  // (407,060 + 814,124) / (814,120 + 1,628,240) = 0.500002: a half, to 3 digits.
  EXPECT_THAT(memory->summary,
              HasSubstr("Param+optimizer bytes per device: A pmap_engine (jit-fsdp) 1.16 MiB vs "
                        "B ddp_ref (ddp) 2.33 MiB = 1/2 of B (devices: 2; A: jit-fsdp over 2 "
                        "devices: 4 of 4 parameter leaves split)"));

  reports::write_reports(result, dir.path("report"));
  const std::string markdown = testing::read_bytes(dir.path("report") / "report.md");
  EXPECT_THAT(markdown, HasSubstr("| parallel style | jit-fsdp | ddp |"));
  EXPECT_THAT(markdown, HasSubstr("| params + optimizer state per replica | 1.16 MiB (params "
                                  "397.5 KiB + optimizer state 795 KiB) | 2.33 MiB (params 795 "
                                  "KiB + optimizer state 1.55 MiB) |"));
  EXPECT_THAT(testing::read_bytes(dir.path("report") / "report.json"),
              HasSubstr("\"param_bytes_per_replica\": [\n        407060,"));
  EXPECT_THAT(testing::read_bytes(dir.path("report") / "report.html"), HasSubstr("jit-fsdp"));
}

}  // namespace
}  // namespace parity::engine_trainer
