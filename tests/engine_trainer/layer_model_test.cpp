// The engine's layers models against PyTorch: four small models over every layer kind (conv with
// SAME, VALID and explicit padding, strided and asymmetric; pools; residuals with and without a
// projection; BatchNorm, LayerNorm; both heads; and the Transformer kinds, attention through
// torch's own multi_head_attention_forward), run in float64 from the same float32-exact
// parameters and inputs. The expected logits, loss, gradients and BatchNorm statistics are
// torch's, converted to Flax's conventions (scripts/gen_layer_model_vectors.py), so they agree
// to float64 round-off.
#include <gtest/gtest.h>

#include <map>

#include "layer_model_vectors.h"
#include "layers_case.h"
#include "models/layer_model.h"
#include "models/model.h"
#include "parity/common/model_layers.h"
#include "pmap_engine/ops.h"

namespace parity::engine_trainer {
namespace {

using testing::expect_close;
using testing::LayerModelVector;
using testing::NamedValues;

constexpr double kTolerance = 1e-12;

// The parameters as the engine reads them from a tensor file (float32, canonical names), in f64.
pe::Tree params_of(const LayerModelVector& vector) {
  NamedTensors tensors;
  for (const NamedValues& param : vector.params) {
    tensors.emplace(param.name, HostTensor::from_f32(param.shape, std::vector<float>(
                                                                      param.values.begin(),
                                                                      param.values.end())));
  }
  return cast_tree(params_from_tensors(tensors, "/"), pe::DType::f64);
}

// Every leaf of `tree` by its canonical name, against the expected named values.
void expect_named_close(const pe::Tree& tree, const std::vector<NamedValues>& expected,
                        const std::string& what) {
  const std::vector<std::string> names = tree.leaf_paths("/");
  const std::vector<pe::Array> leaves = tree.leaves();
  ASSERT_EQ(names.size(), expected.size()) << what;
  for (size_t i = 0; i < names.size(); ++i) {
    // Both sorted by name: the tree's dicts as JAX sorts keys, the generator's by sorted().
    ASSERT_EQ(names[i], expected[i].name) << what;
    EXPECT_EQ(leaves[i].shape(), expected[i].shape) << what << " " << names[i];
    expect_close(leaves[i], expected[i].values, kTolerance, what + " " + names[i]);
  }
}

class LayerModelVsTorch : public ::testing::TestWithParam<const LayerModelVector*> {
 protected:
  LayerModelVsTorch()
      : vector_(*GetParam()),
        spec_(testing::layers_case(dir_, vector_.layers)),
        params_(params_of(vector_)),
        x_(pe::astype(pe::Array::from_floats({vector_.batch, 784}, std::vector<float>(
                                                                        vector_.x.begin(),
                                                                        vector_.x.end())),
                      pe::DType::f64)),
        y_(pe::Array::from_ints({vector_.batch}, vector_.y)) {}

  parity::testing::TempDir dir_;
  const LayerModelVector& vector_;
  const CaseSpec spec_;
  const pe::Tree params_;
  const pe::Array x_;
  const pe::Array y_;
};

TEST_P(LayerModelVsTorch, ParameterNamesAreTheOnesTheCaseInfers) {
  std::vector<std::string> inferred;
  for (const ModelTensor& tensor : infer_model_shapes(spec_.model.layers, spec_.model.input).params) {
    inferred.push_back(tensor.name);
  }
  std::sort(inferred.begin(), inferred.end());
  EXPECT_EQ(params_.leaf_paths("/"), inferred);
}

TEST_P(LayerModelVsTorch, TrainingForwardGivesTorchsLogitsAndFlaxsRunningStatistics) {
  const LayerModelOutput out = layer_model_apply(
      spec_.model, params_, initial_batch_stats(spec_.model, pe::DType::f64), x_, /*train=*/true);
  expect_close(out.outputs, vector_.train_logits, kTolerance, "train logits");
  expect_named_close(out.batch_stats, vector_.batch_stats, "batch_stats");
}

TEST_P(LayerModelVsTorch, LossAndEveryGradientMatchTorchsBackward) {
  // (loss, new batch_stats), grads = value_and_grad(loss_fn, has_aux=True)(...)
  const pe::Tree out = pe::value_and_grad(layer_model_loss(spec_.model), {0}, /*has_aux=*/true)(
      {params_, x_, y_, initial_batch_stats(spec_.model, pe::DType::f64)});
  EXPECT_NEAR(out[0][0].leaf().item(), vector_.loss, kTolerance);
  expect_named_close(out[0][1][0], vector_.batch_stats, "aux batch_stats");
  expect_named_close(out[1], vector_.grads, "grads");
}

TEST_P(LayerModelVsTorch, EvaluationForwardNormalisesWithTheRunningStatistics) {
  const pe::Tree trained = layer_model_apply(spec_.model, params_,
                                             initial_batch_stats(spec_.model, pe::DType::f64), x_,
                                             /*train=*/true)
                               .batch_stats;
  const LayerModelOutput out = layer_model_apply(spec_.model, params_, trained, x_,
                                                 /*train=*/false);
  expect_close(out.outputs, vector_.eval_logits, kTolerance, "eval logits");
  // Evaluation leaves the statistics as they were.
  expect_named_close(out.batch_stats, vector_.batch_stats, "eval batch_stats");
}

const std::map<const LayerModelVector*, std::string>& vector_names() {
  static const std::map<const LayerModelVector*, std::string> names = {
      {&testing::kPoolsAndLayerNorm, "PoolsAndLayerNorm"},
      {&testing::kResNetHead, "ResNetHead"},
      {&testing::kViTClassToken, "ViTClassToken"},
      {&testing::kViTMeanTokens, "ViTMeanTokens"}};
  return names;
}

INSTANTIATE_TEST_SUITE_P(TorchVectors, LayerModelVsTorch,
                         ::testing::Values(&testing::kPoolsAndLayerNorm, &testing::kResNetHead,
                                           &testing::kViTClassToken, &testing::kViTMeanTokens),
                         [](const auto& vector) { return vector_names().at(vector.param); });

TEST(LayerModelNames, FlaxNamesAndMlpNamesBothRoundTripThroughTensors) {
  NamedTensors flax, mlp;
  for (const std::string name : {"Conv_0/kernel", "Residual_1/BatchNorm_0/scale", "Dense_0/bias"}) {
    flax.emplace(name, HostTensor::from_f32({2}, {1.0f, 2.0f}));
  }
  for (const std::string name : {"dense0.kernel", "dense0.bias", "dense1.kernel"}) {
    mlp.emplace(name, HostTensor::from_f32({2}, {1.0f, 2.0f}));
  }
  const pe::Tree flax_tree = params_from_tensors(flax, "/");
  EXPECT_EQ(flax_tree["Residual_1"]["BatchNorm_0"]["scale"].leaf().shape(), pe::Shape{2});
  const pe::Tree mlp_tree = params_from_tensors(mlp);
  EXPECT_EQ(mlp_tree.structure(), "{'dense0': {'bias': *, 'kernel': *}, 'dense1': {'kernel': *}}");
  const auto names = [](const NamedTensors& tensors) {
    std::vector<std::string> out;
    for (const auto& [name, tensor] : tensors) out.push_back(name);
    return out;
  };
  EXPECT_EQ(names(tensors_from_params(flax_tree, "/")), names(flax));
  EXPECT_EQ(names(tensors_from_params(mlp_tree)), names(mlp));
}

}  // namespace
}  // namespace parity::engine_trainer
