// The layer outputs both producers record, as the real cases name them: every path, shape and
// input of cnn-fmnist's ResNet and vit-fmnist's ViT derived by hand from the case files' layer
// lists (each derivation beside it), and the property the readers rely on: the paths sorted as
// strings are the forward order.
#include "parity/common/layer_intermediates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace parity {
namespace {

std::map<std::string, LayerIntermediate> by_path(const std::vector<LayerIntermediate>& list) {
  std::map<std::string, LayerIntermediate> out;
  for (const LayerIntermediate& entry : list) out.emplace(entry.path, entry);
  return out;
}

std::vector<std::string> paths_of(const std::vector<LayerIntermediate>& list) {
  std::vector<std::string> paths;
  for (const LayerIntermediate& entry : list) paths.push_back(entry.path);
  return paths;
}

TEST(LayerIntermediates, APathIsTheIndexPaddedToItsListsWidthThenTheKind) {
  EXPECT_EQ(intermediate_path("", 3, 13, "gelu"), "03_gelu");
  // At least two digits, even in a list of one.
  EXPECT_EQ(intermediate_path("05_residual/", 0, 1, "conv"), "05_residual/00_conv");
  // A list of 101 layers numbers them 000 to 100: as wide as its last index.
  EXPECT_EQ(intermediate_path("", 7, 101, "relu"), "007_relu");
  EXPECT_EQ(intermediate_path("", 100, 101, "relu"), "100_relu");
  EXPECT_EQ(*intermediate_output_path("05_residual", "residual"), "05_residual/sum");
  EXPECT_FALSE(intermediate_output_path("03_mlp_block", "mlp_block").has_value());
  EXPECT_EQ(intermediate_projection_prefix("05_residual"), "05_residual/projection/");
}

// cnn-fmnist's 13 layers (stem conv, batch_norm, relu; four residual blocks each followed by a
// relu; global_avg_pool; dense) record 3 + 4 x (5 branch layers + the sum) + 2 projection layers
// + 4 relus + 2 = 35 outputs.
TEST(LayerIntermediates, CnnFmnistRecordsEveryLayerOfItsBlocksAndTheirSums) {
  const CaseSpec spec = load_case("cnn-fmnist");
  ASSERT_TRUE(records_intermediates(spec.model));
  const std::vector<LayerIntermediate> list = layer_intermediates(spec.model);
  ASSERT_EQ(list.size(), 35u);
  const std::vector<std::string> paths = paths_of(list);
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end())) << "sorted paths are the forward order";
  EXPECT_EQ(paths.front(), "00_conv");
  EXPECT_EQ(paths.back(), "12_dense");
  const auto entries = by_path(list);

  // The stem reads the batch and keeps 28x28 (SAME at stride 1), 16 channels.
  EXPECT_EQ(entries.at("00_conv").inputs, std::vector<std::string>{kIntermediatesInput});
  EXPECT_EQ(entries.at("00_conv").shape, (std::vector<int64_t>{28, 28, 16}));
  // An identity block's branch reads the block's input (the stem's relu), and its sum reads the
  // branch's last layer and that same input.
  EXPECT_EQ(entries.at("03_residual/00_conv").inputs, std::vector<std::string>{"02_relu"});
  EXPECT_EQ(entries.at("03_residual/sum").inputs,
            (std::vector<std::string>{"03_residual/04_batch_norm", "02_relu"}));
  EXPECT_EQ(entries.at("03_residual/sum").kind, "residual");
  // The strided block: its first conv has strides 2 (28 -> 14, 32 channels); its projection
  // reads the block's input (06_relu), not the branch's last layer, which comes before it in
  // forward order; the sum adds the projection's batch_norm.
  const LayerIntermediate& strided = entries.at("07_residual/00_conv");
  EXPECT_EQ(strided.strides, (std::array<int64_t, 2>{2, 2}));
  EXPECT_EQ(strided.shape, (std::vector<int64_t>{14, 14, 32}));
  const LayerIntermediate& projection = entries.at("07_residual/projection/00_conv");
  EXPECT_EQ(projection.inputs, std::vector<std::string>{"06_relu"});
  EXPECT_EQ(projection.strides, (std::array<int64_t, 2>{2, 2}));
  EXPECT_EQ(projection.shape, (std::vector<int64_t>{14, 14, 32}));
  EXPECT_EQ(entries.at("07_residual/sum").inputs,
            (std::vector<std::string>{"07_residual/04_batch_norm",
                                      "07_residual/projection/01_batch_norm"}));
  // Pools and the head: global average pooling leaves the 32 channels, the dense 10 logits.
  EXPECT_EQ(entries.at("11_global_avg_pool").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(entries.at("12_dense").shape, (std::vector<int64_t>{10}));
}

// vit-fmnist: 4x4 patches of a 28x28 image are 7 x 7 = 49 tokens of width 64; each mlp_block
// records its Dense(128), gelu and Dense(64), and has no output of its own.
TEST(LayerIntermediates, VitFmnistRecordsTheLayersInsideEachMlpBlock) {
  const CaseSpec spec = load_case("vit-fmnist");
  const std::vector<LayerIntermediate> list = layer_intermediates(spec.model);
  const std::vector<std::string> paths = paths_of(list);
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  // patch_embed, pos_embed; four residuals of (layer_norm, attention, sum) or (layer_norm, three
  // mlp layers, sum); layer_norm, mean_tokens, dense: 2 + 2 x 3 + 2 x 5 + 3 = 21.
  ASSERT_EQ(list.size(), 21u);
  const auto entries = by_path(list);
  EXPECT_EQ(entries.at("00_patch_embed").shape, (std::vector<int64_t>{49, 64}));
  EXPECT_EQ(entries.at("03_residual/01_mlp_block/00_dense").shape, (std::vector<int64_t>{49, 128}));
  EXPECT_EQ(entries.at("03_residual/01_mlp_block/01_gelu").inputs,
            std::vector<std::string>{"03_residual/01_mlp_block/00_dense"});
  EXPECT_EQ(entries.at("03_residual/01_mlp_block/02_dense").shape, (std::vector<int64_t>{49, 64}));
  EXPECT_EQ(entries.count("03_residual/01_mlp_block"), 0u);
  EXPECT_EQ(entries.at("03_residual/sum").inputs,
            (std::vector<std::string>{"03_residual/01_mlp_block/02_dense", "02_residual/sum"}));
  EXPECT_EQ(entries.at("07_mean_tokens").shape, (std::vector<int64_t>{64}));
}

// Each layer's module is the one whose parameters the model has (infer_model_shapes names them
// as flax.linen does): every module named has a tensor under it, and the functions have none.
TEST(LayerIntermediates, EachLayerNamesTheModuleWhoseParametersItApplies) {
  for (const char* name : {"cnn-fmnist", "vit-fmnist"}) {
    const CaseSpec spec = load_case(name);
    const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
    for (const LayerIntermediate& entry : layer_intermediates(spec.model)) {
      const bool has_params = std::any_of(
          shapes.params.begin(), shapes.params.end(), [&entry](const ModelTensor& tensor) {
            return !entry.module.empty() && tensor.name.rfind(entry.module + "/", 0) == 0;
          });
      EXPECT_EQ(has_params, !entry.module.empty()) << name << " " << entry.path;
    }
  }
  const auto cnn = by_path(layer_intermediates(load_case("cnn-fmnist").model));
  // The stem is the model's first Conv; a block's convs count within its Residual, the
  // projection's continuing the branch's (two convs, then the projection's third).
  EXPECT_EQ(cnn.at("00_conv").module, "Conv_0");
  EXPECT_EQ(cnn.at("01_batch_norm").module, "BatchNorm_0");
  EXPECT_EQ(cnn.at("02_relu").module, "");
  EXPECT_EQ(cnn.at("07_residual/00_conv").module, "Residual_2/Conv_0");
  EXPECT_EQ(cnn.at("07_residual/projection/00_conv").module, "Residual_2/Conv_2");
  EXPECT_EQ(cnn.at("07_residual/sum").module, "");
  EXPECT_EQ(cnn.at("12_dense").module, "Dense_0");
  const auto vit = by_path(layer_intermediates(load_case("vit-fmnist").model));
  EXPECT_EQ(vit.at("03_residual/01_mlp_block/02_dense").module, "Residual_1/MlpBlock_0/Dense_1");
}

TEST(LayerIntermediates, WidthsModelsAndBatchNormsThatSyncRecordNone) {
  EXPECT_FALSE(records_intermediates(load_case("mlp2-fmnist").model));
  const CaseSpec synced = load_case(
      "cnn-fmnist",
      {"model.layers=[{ kind = \"conv\", features = 4, kernel = [3, 3], padding = \"SAME\" }, "
       "{ kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5, sync = true }, "
       "{ kind = \"global_avg_pool\" }, { kind = \"dense\", features = 10 }]"});
  EXPECT_FALSE(records_intermediates(synced.model));
}

}  // namespace
}  // namespace parity
