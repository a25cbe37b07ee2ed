// Overrides that address one layer's key (`--set model.layers[2].momentum=0.99`, nested into a
// residual's branch and shortcut), and a case's scenario.engine_overrides: the settings only the
// engine producer trains with (engine_case). The layers are cnn-fmnist's, counted from 0:
//   0 conv, 1 batch_norm, 2 relu, 3 residual, 4 relu, 5 residual, 6 relu,
//   7 residual (strided, projection = [conv, batch_norm]), 8 relu, 9 residual, 10 relu,
//   11 global_avg_pool, 12 dense
// and each residual's branch is conv, batch_norm, relu, conv, batch_norm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;
using testing::expect_input_error;

const char* const kCnn = "cnn-fmnist";

TEST(LayerOverrides, SetOneKeyOfOneLayerAndLeaveTheOthers) {
  const CaseSpec spec = load_case(kCnn, {"model.layers[1].momentum=0.99"});
  EXPECT_DOUBLE_EQ(spec.model.layers[1].momentum, 0.99);
  EXPECT_DOUBLE_EQ(spec.model.layers[1].epsilon, 1e-5);
  // The residuals' BatchNorms keep the file's momentum.
  EXPECT_DOUBLE_EQ(spec.model.layers[3].layers[1].momentum, 0.9);
  EXPECT_NE(spec.hash(), load_case(kCnn).hash());
  // Setting the value the file has is the same case.
  EXPECT_EQ(load_case(kCnn, {"model.layers[1].momentum=0.9"}).hash(), load_case(kCnn).hash());
}

TEST(LayerOverrides, ReachIntoAResidualsBranchAndShortcut) {
  const CaseSpec spec = load_case(
      kCnn, {"model.layers[3].layers[1].epsilon=1e-6", "model.layers[7].projection[1].momentum=0.5",
             "model.layers[7].layers[0].padding=SAME"});
  EXPECT_DOUBLE_EQ(spec.model.layers[3].layers[1].epsilon, 1e-6);
  EXPECT_DOUBLE_EQ(spec.model.layers[3].layers[4].epsilon, 1e-5);
  EXPECT_DOUBLE_EQ(spec.model.layers[5].layers[1].epsilon, 1e-5);
  EXPECT_DOUBLE_EQ(spec.model.layers[7].projection[1].momentum, 0.5);
  EXPECT_DOUBLE_EQ(spec.model.layers[7].layers[1].momentum, 0.9);
  // A bare word is a string, as for any key: the strided conv's padding becomes "SAME".
  EXPECT_EQ(spec.model.layers[7].layers[0].padding.mode, "SAME");
}

TEST(LayerOverrides, ALayerThatDoesNotExistNamesTheListsSize) {
  expect_input_error([] { load_case(kCnn, {"model.layers[13].momentum=0.99"}); },
                     {"--set model.layers[13].momentum=0.99: model.layers[13]: there is no such "
                      "layer; model.layers holds 13 layer(s), model.layers[0] to "
                      "model.layers[12]",
                      "counted from 0"});
  expect_input_error([] { load_case(kCnn, {"model.layers[3].layers[5].epsilon=1e-6"}); },
                     {"model.layers[3].layers[5]: there is no such layer; model.layers[3].layers "
                      "holds 5 layer(s)"});
  // Layer 3 has no shortcut to index into.
  expect_input_error([] { load_case(kCnn, {"model.layers[3].projection[0].momentum=0.5"}); },
                     {"model.layers[3].projection: the residual layer has no projection list to "
                      "index",
                      "set it whole: model.layers[3].projection=[...]"});
}

TEST(LayerOverrides, AKeyTheKindDoesNotTakeNamesTheKindAndItsKeys) {
  expect_input_error([] { load_case(kCnn, {"model.layers[0].momentum=0.99"}); },
                     {"--set model.layers[0].momentum=0.99: model.layers[0]: a conv layer has no "
                      "key 'momentum'",
                      "its keys: features, kernel, padding, strides, use_bias"});
  expect_input_error([] { load_case(kCnn, {"model.layers[3].layers[1].epsilom=1e-6"}); },
                     {"model.layers[3].layers[1]: a batch_norm layer has no key 'epsilom'",
                      "did you mean 'epsilon'?"});
  // relu takes no keys, so not `layers` either.
  expect_input_error([] { load_case(kCnn, {"model.layers[2].layers[0].epsilon=1e-6"}); },
                     {"model.layers[2]: a relu layer has no key 'layers'; it takes no keys"});
}

TEST(LayerOverrides, ValuesAreCheckedAsTheFilesAndNameTheOverride) {
  expect_input_error([] { load_case(kCnn, {"model.layers[1].momentum=2"}); },
                     {"--set model.layers[1].momentum=2: model.layers[1].momentum: expected a "
                      "number in [0, 1]"});
  // A shape the layers cannot take names the override that changed it, not the file's line:
  // the strided block's shortcut without its stride no longer matches the branch.
  expect_input_error(
      [] { load_case(kCnn, {"model.layers[7].projection[0].strides=[1,1]"}); },
      {"model.layers[7]: residual at --set model.layers[7].projection[0].strides=[1,1]: "
       "its branch gives [14, 14, 32] but its shortcut [28, 28, 32]"});
}

TEST(LayerOverrides, OnlyALayerListTakesAnIndex) {
  expect_input_error([] { load_case(kCnn, {"train.lr[0].x=1"}); },
                     {"--set train.lr[0].x=1: train.lr is not a list of layers, so it takes no "
                      "[index]"});
  expect_input_error([] { load_case("mlp2-fmnist", {"model.layers[0].features=5"}); },
                     {"model.layers: the case lists no layers to address",
                      "a widths model's layers are model.widths"});
  expect_input_error([] { load_case(kCnn, {"model.layers[x].momentum=1"}); },
                     {"expected section.key=value", "model.layers[INDEX].key=value"});
  expect_input_error([] { load_case(kCnn, {"model.layers[1]=1"}); },
                     {"expected section.key=value"});
}

// ---------------------------------------------------------------------------------------------
// scenario.engine_overrides

// A two-layer BatchNorm model with a scenario whose engine keeps Flax's BatchNorm momentum.
std::string bn_case(const std::string& engine_overrides) {
  return "[model]\ninput = [784]\nlayers = [\n"
         "  { kind = \"dense\", features = 16 },\n"
         "  { kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5 },\n"
         "  { kind = \"dense\", features = 10 },\n]\n"
         "[scenario]\nid = \"M99\"\nverdict = \"confirmed\"\nfact_check = \"Confirmed.\"\n"
         "expect = \"not equivalent\"\n"
         "engine_overrides = [\n  " +
         engine_overrides + "\n]\n";
}

// Writes bn_case(engine_overrides) to a file of its own, for one test.
class EngineOverrides : public ::testing::Test {
 protected:
  std::string write_case(const std::string& engine_overrides) {
    testing::write_bytes(file_, bn_case(engine_overrides));
    return file_.string();
  }
  // The InputError loading the case written with `engine_overrides` must name `parts`.
  void expect_refused(const std::string& engine_overrides,
                      std::initializer_list<std::string> parts) {
    const std::string file = write_case(engine_overrides);
    expect_input_error([&] { load_case(file); }, parts);
  }

  testing::TempDir dir_;
  std::filesystem::path file_ = dir_.path("bn.toml");
};

TEST_F(EngineOverrides, TheEngineCaseHasThemAndTheCaseDoesNot) {
  const std::string file =
      write_case("\"model.layers[1].momentum=0.99\", \"train.lr=0.01\"");
  const CaseSpec spec = load_case(file, {"train.steps=3"});
  const CaseSpec engine = engine_case(spec);
  EXPECT_DOUBLE_EQ(spec.model.layers[1].momentum, 0.9);
  EXPECT_DOUBLE_EQ(engine.model.layers[1].momentum, 0.99);
  EXPECT_DOUBLE_EQ(spec.train.lr, 1e-3);
  EXPECT_DOUBLE_EQ(engine.train.lr, 0.01);
  // On top of the case's own overrides.
  EXPECT_EQ(engine.train.steps, 3);
  EXPECT_EQ(engine.source_file, spec.source_file);
  EXPECT_NE(engine.hash(), spec.hash());
  // Applied again they change nothing: a worker process handed the engine's case may.
  EXPECT_EQ(engine_case(engine).to_toml(), engine.to_toml());
  // Both canonical texts keep the list, and it loads back.
  EXPECT_THAT(spec.to_toml(),
              HasSubstr("engine_overrides = [\"model.layers[1].momentum=0.99\", \"train.lr=0.01\"]"));
  EXPECT_EQ(case_from_text(spec.to_toml(), "text").scenario.engine_overrides,
            spec.scenario.engine_overrides);
  // Cleared with --set, the engine trains the case itself.
  const CaseSpec cleared = load_case(file, {"scenario.engine_overrides=[]"});
  EXPECT_EQ(engine_case(cleared).hash(), cleared.hash());
}

TEST_F(EngineOverrides, EachEntryIsCheckedWhenTheCaseLoadsNamingItsLine) {
  // The entries are on line 14 of the file, the first at column 3.
  expect_refused("\"model.layers[5].momentum=0.99\"",
                 {"scenario.engine_overrides model.layers[5].momentum=0.99: model.layers[5]: "
                  "there is no such layer; model.layers holds 3 layer(s)",
                  " at " + file_.string() + ":14:3"});
  expect_refused("\"train.lr=0.01\", \"model.layers[1].momentum=2\"",
                 {"scenario.engine_overrides model.layers[1].momentum=2: "
                  "model.layers[1].momentum: expected a number in [0, 1] at " +
                      file_.string() + ":14:20"});
  expect_refused("\"train.lrr=0.01\"",
                 {"scenario.engine_overrides train.lrr=0.01: unknown key 'lrr' in [train]",
                  "did you mean 'lr'?"});
}

TEST_F(EngineOverrides, SetOnlyWhatTheEngineTrains) {
  expect_refused("\"scenario.expect=equivalent\"",
                 {"scenario.engine_overrides scenario.expect=equivalent: [scenario] is not part "
                  "of what the engine trains",
                  "set it in the case itself, for both producers"});
  expect_refused("\"case.name=other\"", {"[case] is not part of what"});
  // The list belongs to a scenario case.
  testing::write_bytes(file_, "[model]\nwidths = [784, 10]\n[scenario]\nengine_overrides = "
                              "[\"train.lr=0.01\"]\n");
  expect_input_error([&] { load_case(file_.string()); },
                     {"scenario.engine_overrides: a [scenario] needs an id"});
}

}  // namespace
}  // namespace parity
