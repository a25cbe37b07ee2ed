// The case's label-smoothed cross-entropy on the engine
// (engine_trainer/src/models/smoothed_cross_entropy.h) in both conventions, values and
// gradients, against numbers from torch 1.13 in f64 (/usr/bin/python3):
//   logits = torch.tensor([[1.0, -0.5, 0.25, 2.0], [0.0, 0.5, -1.0, 0.75]], dtype=torch.float64,
//                         requires_grad=True); y = torch.tensor([3, 1]); C = 4; eps = 0.1
//   uniform:  l = F.cross_entropy(logits, y, label_smoothing=eps)    # torch's own smoothing
//   flax_examples, the formula of flax examples/wmt/train.py compute_weighted_cross_entropy
//   written in torch (no JAX on this machine):
//     conf = 1 - eps; low = eps / (C - 1)
//     q = F.one_hot(y, C).double() * (conf - low) + low
//     H = -(conf * math.log(conf) + (C - 1) * low * math.log(low))
//     l = (-(q * torch.log_softmax(logits, -1)).sum(-1) - H).mean()
//   torch.autograd.grad(l, logits)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/model.h"
#include "models/smoothed_cross_entropy.h"
#include "pmap_engine/transforms.h"

namespace parity::engine_trainer {
namespace {

pe::Array logits() {
  return pe::Array::from_doubles({2, 4}, {1.0, -0.5, 0.25, 2.0, 0.0, 0.5, -1.0, 0.75});
}
pe::Array labels() { return pe::Array::from_ints({2}, {3, 1}); }

ModelSpec smoothed(double epsilon, const std::string& form) {
  ModelSpec model;
  model.label_smoothing = epsilon;
  model.label_smoothing_form = form;
  return model;
}

struct LossAndGrad {
  double loss;
  std::vector<double> grad;
};

LossAndGrad loss_and_grad(const ModelSpec& model) {
  const pe::TreeFunction loss = [model](const std::vector<pe::Tree>& args) {
    return pe::Tree(pe::mean(smoothed_cross_entropy(model, args[0].leaf(), labels())));
  };
  const pe::Tree out = pe::value_and_grad(loss)({pe::Tree(logits())});
  return {out[0].leaf().item(), out[1].leaf().to_doubles()};
}

void expect_near(const LossAndGrad& actual, double loss, const std::vector<double>& grad) {
  constexpr double kTolerance = 1e-14;  // f64; the engine and torch round in other orders
  EXPECT_NEAR(actual.loss, loss, kTolerance);
  ASSERT_EQ(actual.grad.size(), grad.size());
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(actual.grad[i], grad[i], kTolerance) << i;
}

TEST(LabelSmoothing, UniformFormIsTorchCrossEntropyWithLabelSmoothing) {
  expect_near(loss_and_grad(smoothed(0.1, "uniform")), 0.8977692220306349,
              {0.1007816237416481, 0.012776546847348112, 0.04101045009574701,
               -0.1545686206847432, 0.08489752396903505, -0.30191863051872636,
               0.02333054668921077, 0.19369055986048053});
}

TEST(LabelSmoothing, FlaxExamplesFormIsTheKlDivergenceOfTheirTargets) {
  expect_near(loss_and_grad(smoothed(0.1, "flax_examples")), 0.49199168643904223,
              {0.09661495707498144, 0.008609880180681446, 0.036843783429080346,
               -0.14206862068474319, 0.08073085730236838, -0.28941863051872635,
               0.019163880022544103, 0.18952389319381388});
  EXPECT_NEAR(flax_examples_target_entropy(0.1, 4), 0.4349442022582592, 1e-15);
  // migration-defaults.md item 25: H(q) for eps 0.1 and C = 10 is 0.545 nats.
  EXPECT_NEAR(flax_examples_target_entropy(0.1, 10), 0.545, 5e-4);
}

// Without smoothing every form is the integer-label cross-entropy (torch 1.13:
// F.cross_entropy(logits, y) = 0.8102692220306349), computed by the very op the unsmoothed
// cases train with, so their runs do not change by a bit.
TEST(LabelSmoothing, ZeroEpsilonIsTheIntegerLabelCrossEntropy) {
  for (const char* form : {"uniform", "flax_examples"}) {
    const LossAndGrad plain = loss_and_grad(smoothed(0, form));
    EXPECT_NEAR(plain.loss, 0.8102692220306349, 1e-14) << form;
    const std::vector<double> reference =
        pe::softmax_cross_entropy_with_integer_labels(logits(), labels()).to_doubles();
    EXPECT_EQ(smoothed_cross_entropy(smoothed(0, form), logits(), labels()).to_doubles(),
              reference)
        << form;
  }
}

}  // namespace
}  // namespace parity::engine_trainer
