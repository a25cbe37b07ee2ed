// parallel.style: its values, its place in the canonical text and the hash, and the cases a jit
// style refuses, each error naming the key, where it was set and the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

std::string load_error(const std::string& name_or_path,
                       const std::vector<std::string>& overrides) {
  try {
    load_case(name_or_path, overrides);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(ParallelStyle, DefaultsToPmapAndStaysOutOfTheHash) {
  const CaseSpec base = load_case("mlp2-fmnist");
  EXPECT_EQ(base.parallel.style, "pmap");
  EXPECT_EQ(base.to_toml().find("style"), std::string::npos);
  EXPECT_EQ(load_case("mlp2-fmnist", {"parallel.style=pmap"}).hash(), base.hash());
}

TEST(ParallelStyle, JitStylesLoadFromSetAndRoundTrip) {
  const CaseSpec base = load_case("mlp2-fmnist");
  for (const std::string style : {"jit-dp", "jit-fsdp"}) {
    const CaseSpec jitted = load_case("mlp2-fmnist", {"parallel.style=" + style});
    EXPECT_EQ(jitted.parallel.style, style);
    EXPECT_THAT(jitted.to_toml(),
                HasSubstr("[parallel]\nreplicas = 8\nprocesses = 1\nstyle = \"" + style + "\"\n"));
    EXPECT_NE(jitted.hash(), base.hash());
    const CaseSpec again = case_from_text(jitted.to_toml(), "run/run.json (case.toml)");
    EXPECT_EQ(again.parallel.style, style);
    EXPECT_EQ(again.hash(), jitted.hash());
  }
}

TEST(ParallelStyle, UnknownStyleListsTheValues) {
  EXPECT_EQ(load_error("mlp2-fmnist", {"parallel.style=jit-fdsp"}),
            "--set parallel.style=jit-fdsp: parallel.style: expected one of pmap, jit-dp, "
            "jit-fsdp, found 'jit-fdsp'; did you mean 'jit-fsdp'?");
}

TEST(ParallelStyle, ErrorInAFileNamesTheFileAndTheKey) {
  const testing::TempDir dir;
  const std::string file = (dir.path("t.toml")).string();
  testing::write_bytes(file,
                       "[model]\nwidths = [784, 10]\n[parallel]\nreplicas = 8\nprocesses = 2\n"
                       "style = \"jit-dp\"\n");
  EXPECT_EQ(load_error(file, {}),
            "parallel.style: style = \"jit-dp\" trains in one process (the engine's sharded jit "
            "spans this process's devices), found parallel.processes = 2 at " + file +
                ":6:9; set parallel.processes = 1, or style = \"pmap\" for a multi-process run");
}

// What does not map onto a jit over the global batch, each refused with why and the fix.
struct Refusal {
  std::string case_name;
  std::vector<std::string> overrides;
  std::vector<std::string> words;
};

class JitStyleRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(JitStyleRefuses, NamingTheKeyAndTheFix) {
  const Refusal& refusal = GetParam();
  for (const std::string style : {"jit-dp", "jit-fsdp"}) {
    std::vector<std::string> overrides = refusal.overrides;
    overrides.push_back("parallel.style=" + style);
    const std::string message = load_error(refusal.case_name, overrides);
    EXPECT_THAT(message, HasSubstr("parallel.style: style = \"" + style + "\""));
    EXPECT_THAT(message, HasSubstr("style = \"pmap\""));  // the fix offers pmap
    for (const std::string& word : refusal.words) EXPECT_THAT(message, HasSubstr(word));
  }
}

INSTANTIATE_TEST_SUITE_P(
    ParallelStyle, JitStyleRefuses,
    ::testing::Values(
        Refusal{"s9-multi-process", {}, {"found parallel.processes = 2"}},
        Refusal{"p2-psum-not-pmean",
                {},
                {"scenario.engine_program = \"psum\" is a step written for pmap"}},
        Refusal{"mlp2-fmnist",
                {"train.clip_grad_norm=1.0", "train.clip_placement=before_mean"},
                {"no per-device gradient to clip before the mean"}},
        Refusal{"mlp-fmnist-dropout", {}, {"one dropout mask for the global batch"}},
        Refusal{"cnn-fmnist",
                {},
                {"SyncBatchNorm's semantics", "each rank's batch with that rank's own "
                                              "statistics"}}),
    [](const ::testing::TestParamInfo<Refusal>& row) {
      std::string name = row.param.case_name;
      for (char& c : name) c = c == '-' ? '_' : c;
      return name + "_" + std::to_string(row.index);
    });

// Micro-batches and mixed precision map onto the global batch's step (docs/case-schema.md).
TEST(ParallelStyle, GradientAccumulationAndMixedPrecisionAreAccepted) {
  EXPECT_EQ(load_case("s7-gradient-accumulation", {"parallel.style=jit-fsdp"}).parallel.style,
            "jit-fsdp");
  EXPECT_EQ(load_case("s8-mixed-precision", {"parallel.style=jit-dp"}).train.dtype, "bf16");
}

// A port's engine_overrides are checked, when the case loads, as the engine trains them: M13's
// clip before the mean cannot run under jit.
TEST(ParallelStyle, EngineOverridesAreCheckedUnderTheStyle) {
  EXPECT_THAT(load_error("m13-clip-before-mean", {"parallel.style=jit-dp"}),
              HasSubstr("parallel.style: style = \"jit-dp\" has no per-device gradient to clip "
                        "before the mean (the gradient of the global mean loss is the mean "
                        "already), found train.clip_placement = \"before_mean\" at "));
  EXPECT_THAT(load_error("m13-clip-before-mean", {"parallel.style=jit-dp"}),
              HasSubstr("(canonical, with scenario.engine_overrides)"));
}

}  // namespace
}  // namespace parity
