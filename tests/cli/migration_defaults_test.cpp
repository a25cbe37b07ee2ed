// The catalogue's M cases (../shared/docs/migration-defaults.md): each trains ddp_ref with
// PyTorch's default and the engine with the Flax or Optax default a port keeps (the case's
// scenario.engine_overrides). For each, the case as written behaves as it expects, and the same
// case with the engine's setting swapped flips the verdict: with the PyTorch-matching value the
// engine trains exactly ddp_ref's case and the runs are equivalent, so the default, and nothing
// else, made the difference. M8, the negative control (SGD momentum, equivalent as written),
// flips the other way: without momentum on the engine the comparison sees the difference. Each
// case's runs, fed to every rule of the framework defaults on its own, match only that case's
// rule (the confusion table of docs/catalogue.md, "Diagnosed from the runs alone").
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_command;
using testing::shell_quote;

const std::string kParity = PARITY_EXECUTABLE;

struct MigrationDefault {
  const char* id;
  const char* case_name;
  // The engine's setting swapped in (scenario.engine_overrides replaced by it).
  const char* swapped;
  // Whether the swap makes the engine train ddp_ref's case itself (the PyTorch-matching value).
  bool swap_matches_pytorch;
  // The rules of the framework defaults (compare/src/default_rules.h) that match the runs as
  // written, each rule on its own: the case's row of docs/catalogue.md's confusion table.
  std::vector<std::string> rules;
};

void PrintTo(const MigrationDefault& item, std::ostream* out) { *out << item.id; }

// Each swap is the PyTorch default the case's ddp_ref side keeps, in the engine's terms.
const MigrationDefault kDefaults[] = {
    // torch/nn/modules/linear.py Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)), uniform
    // bias; made by ddp_ref (init.scheme torch) for both producers.
    {"M1", "m1-initialisers", "init.scheme=torch", true, {"M1"}},
    // torch/nn/modules/batchnorm.py _NormBase.__init__ momentum=0.1: Flax's convention 0.9.
    {"M2", "m2-batchnorm-momentum", "model.layers[1].momentum=0.9", true, {"M2"}},
    // torch/nn/modules/conv.py Conv2d(padding=1): (1, 1) on both axes.
    {"M3", "m3-conv-same-padding", "model.layers[0].padding=[[1, 1], [1, 1]]", true, {"M3"}},
    // torch/nn/modules/activation.py GELU(approximate='none'): the erf form.
    {"M4", "m4-gelu-approximate", "model.layers[2].approximate=false", true, {"M4"}},
    // torch/nn/modules/normalization.py LayerNorm(eps=1e-5).
    {"M5", "m5-layernorm-epsilon", "model.layers[1].epsilon=1e-5", true, {"M5"}},
    // torch/optim/adam.py Adam(weight_decay): the L2 term, which the engine's "adam" adds too.
    {"M6", "m6-adam-l2-not-adamw", "train.optimizer=adam", true, {"M6"}},
    // torch/optim/adamw.py AdamW(weight_decay=1e-2).
    {"M7", "m7-adamw-default-decay", "train.weight_decay=0.01", true, {"M7"}},
    // The negative control: optax.sgd without momentum is not torch's SGD(momentum=0.9).
    {"M8", "m8-sgd-momentum", "train.momentum=0", false, {}},
    // torch/optim/rmsprop.py RMSprop(alpha=0.99): the case's own value; the override's
    // eps_in_sqrt=true goes with it, so the engine adds eps after the root as torch does.
    {"M9", "m9-rmsprop-defaults", "train.rms_decay=0.99", true, {"M9"}},
    // torch/optim/adagrad.py Adagrad(initial_accumulator_value=0): the overrides' eps 1e-7 and
    // eps_in_sqrt=true go with it, back to the case's 1e-10 after the root.
    {"M10", "m10-adagrad-defaults", "train.initial_accumulator_value=0", true, {"M10"}},
    // torch/nn/modules/loss.py CrossEntropyLoss(label_smoothing=0.1): optax.smooth_labels'
    // uniform targets with the entropy kept, the default form.
    {"M11", "m11-label-smoothing", "model.label_smoothing_form=uniform", true, {"M11"}},
    // DDP's BatchNorm: each replica's own batch (torch/nn/modules/batchnorm.py _BatchNorm).
    {"M12", "m12-batchnorm-sync", "model.layers[1].sync=false", true, {"M12"}},
    // torch/nn/utils/clip_grad.py clip_grad_norm_ on the all-reduced .grad: after the mean.
    {"M13", "m13-clip-before-mean", "train.clip_placement=after_mean", true, {"M13"}},
    // torch's batch_norm: the two-pass variance E[(x - E[x])^2] (use_fast_variance=False), the
    // negative control of the rule: the same un-centred inputs, no M14 and no difference.
    {"M14", "m14-fast-variance", "model.layers[0].use_fast_variance=false", true, {"M14"}},
};

// `parity cases run ID` (the quick variant) with its folders under `out`.
testing::CommandResult run_case(const std::string& id, const fs::path& out) {
  return run_command(
      fmt::format("{} cases run {} --out {}", kParity, id, shell_quote(out.string())), 120);
}

std::string case_hash(const fs::path& run_dir) {
  return nlohmann::json::parse(testing::read_bytes(run_dir / "run.json"))
      .at("case")
      .at("hash")
      .get<std::string>();
}

class MigrationDefaults : public ::testing::TestWithParam<MigrationDefault> {};

TEST_P(MigrationDefaults, AsWrittenAsExpectedAndTheSwappedDefaultFlipsTheVerdict) {
  const MigrationDefault& item = GetParam();
  const CaseSpec spec = load_case(item.case_name);
  ASSERT_EQ(spec.scenario.id, item.id);
  testing::TempDir out;

  // As written (the quick variant): the expectation, its figures and its verdict hold.
  const auto as_written = run_case(item.id, out.path());
  EXPECT_EQ(as_written.exit_code, 0) << as_written.output;
  EXPECT_THAT(as_written.output,
              HasSubstr(fmt::format("{:<4} {:<21} {}: {}", item.id, "confirmed",
                                    spec.scenario.title, spec.scenario.expect)));
  // Every default rule on its own stays silent unless the case is its fingerprint.
  const fs::path written = out.path(item.case_name);
  EXPECT_EQ(compare::matching_default_rules(read_run_dir(written / "pmap"),
                                            read_run_dir(written / "ddp"), {}),
            item.rules);

  // The same quick variant with the engine's setting swapped, judged by parity run.
  std::string command = fmt::format("{} run {} --out {}", kParity, item.case_name,
                                    shell_quote(out.path("swapped").string()));
  for (const std::string& quick : spec.scenario.quick) command += " --set " + shell_quote(quick);
  command += " --set " +
             shell_quote(fmt::format("scenario.engine_overrides=[\"{}\"]", item.swapped));
  const auto swapped = run_command(command, 120);
  const fs::path runs = out.path("swapped") / item.case_name;
  if (item.swap_matches_pytorch) {
    EXPECT_EQ(swapped.exit_code, 0) << "expected equivalent: " << swapped.output;
    // The engine trained ddp_ref's case itself: the PyTorch-matching value is all it took.
    EXPECT_EQ(case_hash(runs / "pmap"), case_hash(runs / "ddp"));
  } else {
    EXPECT_EQ(swapped.exit_code, 1) << "expected not equivalent: " << swapped.output;
    EXPECT_NE(case_hash(runs / "pmap"), case_hash(runs / "ddp"));
  }
}

std::string item_id(const ::testing::TestParamInfo<MigrationDefault>& param) {
  return param.param.id;
}

INSTANTIATE_TEST_SUITE_P(Cases, MigrationDefaults, ::testing::ValuesIn(kDefaults), item_id);

// M2 as written: the engine trains with its override and ddp_ref without, each run directory
// records the case it trained, and the comparison's case check names the one layer key.
TEST(EngineOverridesRun, TheEngineTrainsWithThemAndTheReportNamesTheLayerKey) {
  testing::TempDir out;
  const auto run = run_case("M2", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path dir = out.path("m2-batchnorm-momentum");
  const auto case_toml = [&](const char* producer) {
    return nlohmann::json::parse(testing::read_bytes(dir / producer / "run.json"))
        .at("case")
        .at("toml")
        .get<std::string>();
  };
  const std::string engine_bn = "{ kind = \"batch_norm\", momentum = 0.99, epsilon = 1e-05 }";
  const std::string ddp_bn = "{ kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-05 }";
  EXPECT_THAT(case_toml("pmap"), HasSubstr(engine_bn));
  EXPECT_THAT(case_toml("ddp"), HasSubstr(ddp_bn));
  EXPECT_THAT(case_toml("ddp"), Not(HasSubstr(engine_bn)));
  // One init file: the initialisation is not what differs.
  EXPECT_TRUE(fs::exists(dir / "init.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "init-engine.safetensors"));

  const nlohmann::json report =
      nlohmann::json::parse(testing::read_bytes(dir / "report/report.json"));
  bool found = false;
  for (const auto& check : report.at("checks")) {
    if (check.at("id") != "case") continue;
    found = true;
    EXPECT_EQ(check.at("status"), "warn");
    EXPECT_THAT(check.at("summary").get<std::string>(),
                HasSubstr("1 key(s) differ: model.layers[1].momentum."));
    EXPECT_EQ(check.at("details"),
              nlohmann::json::array({"model.layers[1].momentum: A 0.99, B 0.9"}));
  }
  EXPECT_TRUE(found) << report.dump(2);
  EXPECT_THAT(testing::read_bytes(dir / "report/report.md"),
              HasSubstr("model.layers\\[1\\].momentum"));
}

// M1 changes [init]: each producer starts from its own file, made by its own scheme.
TEST(EngineOverridesRun, AnInitOverrideGivesTheEngineItsOwnInitFile) {
  testing::TempDir out;
  const auto run = run_case("M1", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path dir = out.path("m1-initialisers");
  const std::string torch_init = testing::read_bytes(dir / "init.safetensors");
  const std::string flax_init = testing::read_bytes(dir / "init-engine.safetensors");
  EXPECT_THAT(torch_init, HasSubstr("\"scheme\":\"torch\""));
  EXPECT_THAT(flax_init, HasSubstr("\"scheme\":\"flax\""));
  // The same tensors by name and shape, other values.
  const std::string kernel = "\"Dense_0/kernel\":{\"dtype\":\"F32\",\"shape\":[784,64]";
  EXPECT_THAT(torch_init, HasSubstr(kernel));
  EXPECT_THAT(flax_init, HasSubstr(kernel));
  EXPECT_NE(torch_init, flax_init);
}

// `parity program` prints the step the engine trains: clipping each device's gradient before the
// mean is the mapped step. Its gradients' psums: the unclipped mean (what grad_norm reports),
// then, after the device's own global norm (its sqrt), the mean of the clipped gradients.
TEST(MigrationDefaultsProgram, ClippingBeforeTheMeanPrintsTheMappedStep) {
  const auto result = run_command(
      fmt::format("{} program m13-clip-before-mean --set train.clip_placement=before_mean", kParity),
      120);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string& text = result.output;
  const size_t sqrt_at = text.find("= sqrt ");
  const size_t last_psum = text.rfind("= psum[");
  ASSERT_NE(sqrt_at, std::string::npos) << text;
  ASSERT_NE(last_psum, std::string::npos) << text;
  EXPECT_NE(text.find("= psum["), last_psum) << "one psum for each mean";
  EXPECT_LT(sqrt_at, last_psum);
}

}  // namespace
}  // namespace parity
