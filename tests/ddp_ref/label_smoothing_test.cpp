// ddp_ref's label-smoothed loss is LibTorch's own cross_entropy(label_smoothing): the uniform
// form, checked against torch 1.13 (/usr/bin/python3, f64):
//   logits = torch.tensor([[1.0, -0.5, 0.25, 2.0], [0.0, 0.5, -1.0, 0.75]], dtype=torch.float64)
//   F.cross_entropy(logits, torch.tensor([3, 1]), label_smoothing=0.1)   # 0.8977692220306349
// The Flax examples' form has no torch loss: ddp_ref refuses it before any rank starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/ddp_ref/ddp_ref.h"

namespace parity::ddp_ref {
namespace {

using ::testing::HasSubstr;

TEST(DdpLabelSmoothing, TheLossIsTorchCrossEntropyWithLabelSmoothing) {
  ModelSpec model;
  model.label_smoothing = 0.1;
  const torch::Tensor logits =
      torch::tensor({1.0, -0.5, 0.25, 2.0, 0.0, 0.5, -1.0, 0.75}, torch::kFloat64).view({2, 4});
  const torch::Tensor labels = torch::tensor({3, 1}, torch::kInt64);
  // compute_loss returns f32, as every producer records it.
  EXPECT_NEAR(compute_loss(model, logits, labels).item<double>(), 0.8977692220306349, 1e-7);
  model.label_smoothing = 0;
  EXPECT_NEAR(compute_loss(model, logits, labels).item<double>(), 0.8102692220306349, 1e-7);
}

TEST(DdpLabelSmoothing, TheFlaxExamplesFormIsRefusedWithTheFix) {
  CaseSpec spec;
  spec.name = "smoothed";
  spec.model.widths = {784, 10};
  spec.model.label_smoothing = 0.1;
  spec.model.label_smoothing_form = "flax_examples";
  try {
    check_options(spec, DdpOptions{});
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr("model.label_smoothing_form = \"flax_examples\""));
    EXPECT_THAT(error.what(), HasSubstr("--set model.label_smoothing_form=uniform"));
    EXPECT_THAT(error.what(), HasSubstr("scenario.engine_overrides"));
  }
  spec.model.label_smoothing_form = "uniform";
  EXPECT_NO_THROW(check_options(spec, DdpOptions{}));
}

}  // namespace
}  // namespace parity::ddp_ref
