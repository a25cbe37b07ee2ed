// [model] layers in real case files: what is read, the shapes and Flax names inferred (expected
// values derived by hand from the layer definitions, each derivation beside it), the canonical
// text's round trip, and every kind of bad description refused with its line and a fix.
#include "parity/common/model_layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

// A small ResNet on Fashion-MNIST: a stem, one identity block, one strided block with a
// projection, global average pooling and a dense head.
const char* const kResNet = R"([case]
name = "resnet"

[model]
input = [28, 28, 1]
loss = "softmax_cross_entropy"
layers = [
  { kind = "conv", features = 8, kernel = [3, 3], padding = "SAME", use_bias = false },
  { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 },
  { kind = "relu" },
  { kind = "residual", layers = [
      { kind = "conv", features = 8, kernel = [3, 3], padding = "SAME", use_bias = false },
      { kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 } ] },
  { kind = "residual", layers = [
      { kind = "conv", features = 16, kernel = [3, 3], strides = [2, 2], padding = "SAME" } ], projection = [
      { kind = "conv", features = 16, kernel = [1, 1], strides = [2, 2], padding = "VALID" } ] },
  { kind = "gelu", approximate = false },
  { kind = "global_avg_pool" },
  { kind = "dense", features = 10 },
]
)";

class LayersCase : public testing::TempDir {
 public:
  // Writes the case as <dir>/resnet.toml with `layers_text` in place of kResNet's layer list
  // when given.
  std::string write(const std::string& text = kResNet) const {
    const auto file = path("resnet.toml");
    testing::write_bytes(file, text);
    return file.string();
  }
};

std::string load_error(const std::string& file, const std::vector<std::string>& overrides = {}) {
  try {
    load_case(file, overrides);
  } catch (const InputError& error) {
    return error.what();
  }
  return "(loaded)";
}

// kResNet with its layer list replaced by `layers`.
std::string with_layers(const std::string& input, const std::string& layers) {
  return "[case]\nname = \"resnet\"\n\n[model]\ninput = " + input + "\nlayers = [\n" + layers +
         "\n]\n";
}

TEST(ModelLayers, AResNetIsReadWithItsShapesAndFlaxNames) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write());
  ASSERT_EQ(spec.model.layers.size(), 8u);
  EXPECT_EQ(spec.model.layers[3].kind, "residual");
  EXPECT_EQ(spec.model.layers[4].projection.front().strides, (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(spec.model.layers[0].origin, HasSubstr("resnet.toml:8:3"));

  const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
  // 28x28 SAME stride 1 keeps 28x28; SAME stride 2 gives ceil(28 / 2) = 14, and the 1x1 VALID
  // stride-2 projection floor((28 - 1) / 2) + 1 = 14; pooling leaves the 16 channels.
  EXPECT_EQ(shapes.output, (std::vector<int64_t>{10}));
  std::vector<std::string> names;
  for (const ModelTensor& tensor : shapes.params) names.push_back(tensor.name);
  // One counter per class within each parent; the projection continues its block's counters.
  EXPECT_EQ(names,
            (std::vector<std::string>{"Conv_0/kernel", "BatchNorm_0/scale", "BatchNorm_0/bias",
                                      "Residual_0/Conv_0/kernel", "Residual_0/BatchNorm_0/scale",
                                      "Residual_0/BatchNorm_0/bias", "Residual_1/Conv_0/kernel",
                                      "Residual_1/Conv_0/bias", "Residual_1/Conv_1/kernel",
                                      "Residual_1/Conv_1/bias", "Dense_0/kernel", "Dense_0/bias"}));
  EXPECT_EQ(shapes.params[0].shape, (std::vector<int64_t>{3, 3, 1, 8}));   // HWIO
  EXPECT_EQ(shapes.params[8].shape, (std::vector<int64_t>{1, 1, 8, 16}));  // the projection
  EXPECT_EQ(shapes.params[10].shape, (std::vector<int64_t>{16, 10}));      // (in, out)
  ASSERT_EQ(shapes.batch_stats.size(), 4u);
  EXPECT_EQ(shapes.batch_stats[0].name, "BatchNorm_0/mean");
  EXPECT_EQ(shapes.batch_stats[3].name, "Residual_0/BatchNorm_0/var");
}

TEST(ModelLayers, TheViTCaseHasTokensAndFlaxAttentionNames) {
  const CaseSpec spec = load_case("vit-fmnist");
  const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
  EXPECT_EQ(shapes.output, (std::vector<int64_t>{10}));
  EXPECT_TRUE(shapes.batch_stats.empty());
  std::map<std::string, std::vector<int64_t>> by_name;
  for (const ModelTensor& tensor : shapes.params) by_name[tensor.name] = tensor.shape;
  // 4x4 patches of a 28x28x1 image: a 4x4x1x64 VALID conv with stride 4, (28 / 4)^2 = 49 tokens.
  EXPECT_EQ(by_name.at("Conv_0/kernel"), (std::vector<int64_t>{4, 4, 1, 64}));
  EXPECT_EQ(by_name.at("AddPositionEmbs_0/pos_embedding"), (std::vector<int64_t>{1, 49, 64}));
  // 4 heads of 64 / 4 = 16 features: DenseGeneral kernels (E, H, E/H), out (H, E/H, E).
  EXPECT_EQ(by_name.at("Residual_0/MultiHeadDotProductAttention_0/query/kernel"),
            (std::vector<int64_t>{64, 4, 16}));
  EXPECT_EQ(by_name.at("Residual_2/MultiHeadDotProductAttention_0/value/bias"),
            (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(by_name.at("Residual_0/MultiHeadDotProductAttention_0/out/kernel"),
            (std::vector<int64_t>{4, 16, 64}));
  EXPECT_EQ(by_name.at("Residual_1/MlpBlock_0/Dense_0/kernel"), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(by_name.at("Residual_3/MlpBlock_0/Dense_1/kernel"), (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(by_name.at("LayerNorm_0/scale"), (std::vector<int64_t>{64}));
  EXPECT_EQ(by_name.at("Dense_0/kernel"), (std::vector<int64_t>{64, 10}));
  // 1 patch conv (2) + pos (1) + 2 x (LN 2 + attention 8) + 2 x (LN 2 + MLP 4) + LN 2 + dense 2.
  EXPECT_EQ(shapes.params.size(), 2u + 1 + 2 * 10 + 2 * 6 + 2 + 2);
}

TEST(ModelLayers, AClassTokenIsAParameterOfTheModelAndATokenMore) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write(with_layers("[28, 28, 1]", R"(
  { kind = "patch_embed", patch = [7, 7], features = 8, use_bias = false },
  { kind = "class_token" }, { kind = "pos_embed" },
  { kind = "take_class_token" }, { kind = "dense", features = 10 })")));
  const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
  ASSERT_EQ(shapes.params.size(), 5u);
  EXPECT_EQ(shapes.params[0].name, "Conv_0/kernel");  // no bias
  EXPECT_EQ(shapes.params[1].name, "cls");
  EXPECT_EQ(shapes.params[1].shape, (std::vector<int64_t>{1, 1, 8}));
  // (28 / 7)^2 = 16 patches and the class token.
  EXPECT_EQ(shapes.params[2].shape, (std::vector<int64_t>{1, 17, 8}));
}

TEST(ModelLayers, TheCanonicalTextReadsBackToTheSameCaseAndHash) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write());
  const CaseSpec again = load_case(dir.write(spec.to_toml()));
  EXPECT_TRUE(again.model.layers == spec.model.layers);
  EXPECT_EQ(again.model.input, spec.model.input);
  EXPECT_EQ(again.hash(), spec.hash());
  EXPECT_THAT(spec.to_toml(),
              HasSubstr("{ kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-05 }"));
}

// use_fast_variance is optional, true (Flax's default) unless a case says false, and written
// only when false, so the cases that do not set it keep their hash.
TEST(ModelLayers, UseFastVarianceIsReadDefaultsToFlaxsAndIsWrittenOnlyWhenFalse) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write());
  EXPECT_TRUE(spec.model.layers[1].use_fast_variance);
  EXPECT_THAT(spec.to_toml(), ::testing::Not(HasSubstr("use_fast_variance")));
  EXPECT_EQ(load_case(dir.write(), {"model.layers[1].use_fast_variance=true"}).hash(), spec.hash());

  const CaseSpec two_pass = load_case(dir.write(), {"model.layers[1].use_fast_variance=false"});
  EXPECT_FALSE(two_pass.model.layers[1].use_fast_variance);
  EXPECT_NE(two_pass.hash(), spec.hash());
  EXPECT_THAT(two_pass.to_toml(), HasSubstr("{ kind = \"batch_norm\", momentum = 0.9, epsilon = "
                                            "1e-05, use_fast_variance = false }"));
  const CaseSpec again = load_case(dir.write(two_pass.to_toml()));
  EXPECT_TRUE(again.model.layers == two_pass.model.layers);
  EXPECT_EQ(again.hash(), two_pass.hash());
}

TEST(ModelLayers, TheViTCaseReadsBackFromItsCanonicalText) {
  testing::TempDir dir;
  const CaseSpec spec = load_case("vit-fmnist");
  const auto file = dir.path("vit-fmnist.toml");
  testing::write_bytes(file, spec.to_toml());
  const CaseSpec again = load_case(file.string());
  EXPECT_TRUE(again.model.layers == spec.model.layers);
  EXPECT_EQ(again.hash(), spec.hash());
  EXPECT_THAT(spec.to_toml(), HasSubstr("{ kind = \"attention\", heads = 4 }"));
  EXPECT_THAT(spec.to_toml(),
              HasSubstr("{ kind = \"mlp_block\", hidden = 128, approximate = false }"));
}

TEST(ModelLayers, AWidthsCaseWritesNeitherInputNorLayersSoItsHashIsUnchanged) {
  const CaseSpec spec = load_case("mlp2-fmnist");
  EXPECT_THAT(spec.to_toml(), ::testing::Not(HasSubstr("layers")));
  EXPECT_THAT(spec.to_toml(), ::testing::Not(HasSubstr("input")));
}

struct BadLayers {
  std::string name;
  std::string input;
  std::string layers;
  std::vector<std::string> messages;  // each in the error
};

std::ostream& operator<<(std::ostream& out, const BadLayers& bad) { return out << bad.name; }

class BadModelLayers : public ::testing::TestWithParam<BadLayers> {};

TEST_P(BadModelLayers, AreRefusedWithTheLineAndAFix) {
  LayersCase dir;
  const std::string error = load_error(dir.write(with_layers(GetParam().input, GetParam().layers)));
  for (const std::string& message : GetParam().messages) EXPECT_THAT(error, HasSubstr(message));
}

const std::string kHead = R"(  { kind = "flatten" }, { kind = "dense", features = 10 })";

INSTANTIATE_TEST_SUITE_P(
    Descriptions, BadModelLayers,
    ::testing::Values(
        BadLayers{"UnknownKind",
                  "[784]",
                  R"(  { kind = "dens", features = 10 })",
                  {"model.layers[0].kind: unknown layer kind 'dens'",
                   "resnet.toml:7:", "did you mean 'dense'?"}},
        BadLayers{
            "ConvOnFlatRows",
            "[784]",
            R"(  { kind = "conv", features = 4, kernel = [3, 3], padding = "SAME" },)" + kHead,
            {"conv at ", "resnet.toml:7:3",
             "it takes an image (height, width, channels), found [784]",
             "(for fashion-mnist [28, 28, 1])"}},
        BadLayers{"ResidualShapesDiffer",
                  "[28, 28, 1]",
                  R"(  { kind = "residual", layers = [
      { kind = "conv", features = 4, kernel = [3, 3], padding = "SAME" } ] },)" +
                      kHead,
                  {"residual at ", "its branch gives [28, 28, 4] but its shortcut [28, 28, 1]",
                   "add a projection"}},
        BadLayers{"BatchNormWithoutMomentum",
                  "[784]",
                  R"(  { kind = "batch_norm", epsilon = 1e-5 },)" + kHead,
                  {"model.layers[0]: a batch_norm layer needs momentum",
                   "torch's momentum 0.1 is Flax's 0.9"}},
        BadLayers{"WindowLargerThanItsInput",
                  "[28, 28, 1]",
                  R"(  { kind = "max_pool", window = [30, 30], strides = [1, 1] },)" + kHead,
                  {"its 30x30 window does not fit an input of 28 along axis 0"}},
        BadLayers{"NoVectorAtTheEnd",
                  "[28, 28, 1]",
                  R"(  { kind = "relu" })",
                  {"model.layers: the last layer gives one sample a shape of rank 3",
                   "end with global_avg_pool or flatten, then dense"}},
        BadLayers{"InputOtherThanTheImages",
                  "[27, 28, 1]",
                  kHead,
                  {"model.input: fashion-mnist images have 784 features (28x28), so the product "
                   "of input must be 784, found 756"}},
        BadLayers{"KeyTheKindLacks",
                  "[784]",
                  R"(  { kind = "relu", rate = 0.5 },)" + kHead,
                  {"model.layers[0]: a relu layer has no key 'rate'", "it takes no keys"}},
        BadLayers{
            "PaddingWord",
            "[28, 28, 1]",
            R"(  { kind = "conv", features = 4, kernel = [3, 3], padding = "same" },)" + kHead,
            {"model.layers[0].padding: expected \"SAME\" or \"VALID\", found \"same\""}},
        BadLayers{"PatchThatDoesNotDivideTheImage",
                  "[28, 28, 1]",
                  R"(  { kind = "patch_embed", patch = [3, 3], features = 8 },
  { kind = "mean_tokens" }, { kind = "dense", features = 10 })",
                  {"patch_embed at ", "a patch of 3 does not divide the image's 28 along axis 0",
                   "use a patch size that divides 28: 1, 2, 4, 7, 14, 28"}},
        BadLayers{"HeadsThatDoNotDivideTheFeatures",
                  "[28, 28, 1]",
                  R"(  { kind = "patch_embed", patch = [4, 4], features = 10 },
  { kind = "attention", heads = 4 }, { kind = "mean_tokens" }, { kind = "dense", features = 10 })",
                  {"attention at ", "4 heads do not divide the 10 features",
                   "use a number of heads that divides 10: 1, 2, 5, 10"}},
        BadLayers{"AttentionOnAnImage",
                  "[28, 28, 1]",
                  R"(  { kind = "attention", heads = 1 },)" + kHead,
                  {"it takes a sequence of tokens (tokens, features), found [28, 28, 1]",
                   "put a patch_embed layer before it"}},
        BadLayers{"FastVarianceNotABoolean",
                  "[784]",
                  R"(  { kind = "layer_norm", epsilon = 1e-6, use_fast_variance = "no" },)" + kHead,
                  {"model.layers[0].use_fast_variance: expected true or false",
                   "resnet.toml:7:", "false for E[(x - E[x])^2] (torch's form)"}},
        BadLayers{"FastVarianceOnADenseLayer",
                  "[784]",
                  R"(  { kind = "dense", features = 10, use_fast_variance = false })",
                  {"model.layers[0]: a dense layer has no key 'use_fast_variance'"}},
        BadLayers{"DropoutRateOfOne",
                  "[784]",
                  R"(  { kind = "dropout", rate = 1.0 },)" + kHead,
                  {"model.layers[0].rate: expected a number in [0, 1)"}},
        BadLayers{"FeaturesBeyondInt32",
                  "[784]",
                  R"(  { kind = "dense", features = 9223372036854775807 })",
                  {"model.layers[0].features: expected an integer in [1, 2147483647]"}},
        BadLayers{"BatchNormOnTokens",
                  "[28, 28, 1]",
                  R"(  { kind = "patch_embed", patch = [7, 7], features = 8 },
  { kind = "residual", layers = [{ kind = "batch_norm", momentum = 0.9, epsilon = 1e-5 }] },
  { kind = "mean_tokens" }, { kind = "dense", features = 10 })",
                  {"model.layers[1].layers[0]: batch_norm at ", "found tokens [16, 8]",
                   "use layer_norm on tokens"}},
        BadLayers{
            "ASecondClassToken",
            "[28, 28, 1]",
            R"(  { kind = "patch_embed", patch = [7, 7], features = 8 },
  { kind = "class_token" },
  { kind = "residual", layers = [{ kind = "class_token" }], projection = [{ kind = "class_token" }] },
  { kind = "take_class_token" }, { kind = "dense", features = 10 })",
            {"model.layers[2].layers[0]: class_token at ",
             "a second class_token (the first is model.layers[1] at ", "keep one class_token"}},
        BadLayers{
            "AnOutputOfMoreThan2To48ValuesPerSample",
            "[28, 28, 1]",
            R"(  { kind = "conv", features = 2147483647, kernel = [1, 1], padding = [[2147483647, 2147483647], [0, 0]] },)" +
                kHead,
            {"model.layers[0]: conv at ", "more than the 2^48 any machine holds", "less padding"}},
        BadLayers{"AttentionDropout",
                  "[28, 28, 1]",
                  R"(  { kind = "patch_embed", patch = [7, 7], features = 8 },
  { kind = "attention", heads = 2, rate = 0.1 }, { kind = "mean_tokens" },
  { kind = "dense", features = 10 })",
                  {"model.layers[1]: attention at ",
                   "rate 0.1: the engine does not model dropout "
                   "on the attention weights yet",
                   "put a dropout layer after the attention"}}),
    [](const ::testing::TestParamInfo<BadLayers>& row) { return row.param.name; });

// Flax leaves a submodule that writes no variable out of the params tree (flax/core/scope.py,
// Scope._mutable_collection) but counts it in its class's names.
TEST(ModelLayers, AResidualWithoutParametersIsNamedButHoldsNone) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write(with_layers("[784]", R"(
  { kind = "residual", layers = [{ kind = "relu" }] },
  { kind = "residual", layers = [{ kind = "dense", features = 784 }] },
  { kind = "dense", features = 10 })")));
  const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
  ASSERT_EQ(shapes.params.size(), 4u);
  EXPECT_EQ(shapes.params[0].name, "Residual_1/Dense_0/kernel");
  EXPECT_EQ(shapes.params[2].name, "Dense_0/kernel");
}

// What the limits read (case_limits.h): every layer, nested ones after their residual's layers,
// with its own parameters, linear in the layers.
TEST(ModelLayers, EveryLayerIsRecordedWithItsShapesAndParameters) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write());
  const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
  // 8 layers of the list, 2 in the first residual, 1 + 1 in the second.
  ASSERT_EQ(shapes.layers.size(), 12u);
  EXPECT_EQ(shapes.layers[0].layer->place, "model.layers[0]");
  EXPECT_EQ(shapes.layers[0].parameters, 3 * 3 * 1 * 8);  // no bias
  EXPECT_EQ(shapes.layers[0].output, (std::vector<int64_t>{28, 28, 8}));
  EXPECT_EQ(shapes.layers[1].parameters, 2 * 8);  // scale and bias; the statistics are state
  EXPECT_EQ(shapes.layers[3].layer->place, "model.layers[3].layers[0]");
  EXPECT_EQ(shapes.layers[5].layer->place, "model.layers[3]");
  EXPECT_EQ(shapes.layers[5].parameters, 0);  // its layers hold them
  EXPECT_EQ(shapes.layers[7].layer->place, "model.layers[4].projection[0]");
  EXPECT_EQ(shapes.layers[7].input, (std::vector<int64_t>{28, 28, 8}));
  EXPECT_EQ(shapes.layers[7].output, (std::vector<int64_t>{14, 14, 16}));
  EXPECT_EQ(shapes.layers[11].parameters, 16 * 10 + 10);
}

TEST(ModelLayers, WidthsAndLayersTogetherAreRefused) {
  LayersCase dir;
  std::string text = kResNet;
  text.replace(text.find("input ="), 0, "widths = [784, 10]\n");
  EXPECT_THAT(load_error(dir.write(text)),
              HasSubstr("model.widths: a model is given either as widths or as layers, not both"));
}

}  // namespace
}  // namespace parity
