// ddp_ref's evaluation forward: the test set in chunks on several threads gives every row's
// output, in row order, as one forward of the whole set in eval mode does.
#include "evaluation.h"

#include <gtest/gtest.h>

#include "layer_model.h"
#include "parity/common/case_spec.h"

namespace parity::ddp_ref {
namespace {

LayerSpec layer(const std::string& kind, int64_t features = 0) {
  LayerSpec spec;
  spec.kind = kind;
  spec.features = features;
  return spec;
}

// A small CNN with a BatchNorm, whose eval mode reads the running statistics moved here by a
// few training forwards.
ModelSpec small_cnn() {
  ModelSpec spec;
  spec.input = {8, 8, 1};
  spec.loss = "softmax_cross_entropy";
  LayerSpec conv = layer("conv", 4);
  conv.kernel = {3, 3};
  conv.padding.mode = "SAME";
  LayerSpec norm = layer("batch_norm");
  norm.momentum = 0.9;
  norm.epsilon = 1e-5;
  spec.layers = {conv, norm, layer("relu"), layer("global_avg_pool"), layer("dense", 10)};
  return spec;
}

TEST(DdpEvaluation, ChunksOnThreadsGiveTheWholeSetsOutputsInRowOrder) {
  LayerModel model(small_cnn());
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  for (int step = 0; step < 3; ++step) model->forward(torch::randn({16, 64}, generator) + step);
  // Not a whole number of chunks: the last one is short.
  const torch::Tensor rows = torch::randn({1050, 64}, generator);

  const torch::Tensor outputs = evaluation_outputs(*model, rows);
  EXPECT_FALSE(model->is_training());
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = model->forward(rows);
  }
  ASSERT_EQ(outputs.sizes(), expected.sizes());
  EXPECT_FALSE(outputs.requires_grad());
  // Not bit for bit: a kernel may block a larger batch differently.
  EXPECT_TRUE(torch::allclose(outputs, expected, 1e-5, 1e-6))
      << (outputs - expected).abs().max().item<float>();
}

}  // namespace
}  // namespace parity::ddp_ref
