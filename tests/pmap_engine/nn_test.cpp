// Neural-network functions (jax.nn, optax losses): known values, finite-difference gradients in
// f64, a closed-form gradient for softmax cross-entropy, jit vs op by op, and error messages.
//
// Provenance of the known values: NumPy 1.24.2 in f64 (/usr/bin/python3), with this snippet
// (math.erfc for the exact gelu, the standard library having no vectorised erfc):
//   import numpy as np, math
//   x = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5])
//   0.5*x*(1+np.tanh(np.sqrt(2/np.pi)*(x+0.044715*x**3)))                   # gelu, tanh form
//   [0.5*v*math.erfc(-v/math.sqrt(2)) for v in x]                            # gelu, erf form
//   a = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, 999.0]])
//   m = a.max(axis=1, keepdims=True)
//   np.log(np.exp(a-m).sum(axis=1)) + m[:,0]                                  # logsumexp axis 1
//   a - m - np.log(np.exp(a-m).sum(axis=1, keepdims=True))                    # log_softmax
//   np.exp(a-m)/np.exp(a-m).sum(axis=1, keepdims=True)                        # softmax
//   logits = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0], [10.0, 20.0, 30.0]])
//   labels = np.array([0, 2, 1]); mm = logits.max(axis=1, keepdims=True)
//   np.log(np.exp(logits-mm).sum(axis=1)) + mm[:,0] - logits[np.arange(3), labels]  # CE
//   p = np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 0.5]])
//   t = np.array([[0.5, 2.0], [1.0, 5.0], [0.0, 0.0]]); ((p-t)**2).mean()   # mse
// Values are compared within a few f64 ulps (1e-15 relative): the engine rounds the same
// formulas in a slightly different order in places (x * cdf vs 0.5 * x * (...)).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gradient_check.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using testing::expect_error_mentions;
using testing::expect_gradients_match_finite_differences;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_doubles_near(const std::vector<double>& actual, const std::vector<double>& expected,
                         double relative_tolerance = 1e-15) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << "index " << i;
      continue;
    }
    EXPECT_NEAR(actual[i], expected[i], relative_tolerance * std::max(1.0, std::abs(expected[i])))
        << "index " << i;
  }
}

// Weights that make a vector-valued function's gradient check see every output: sum(f(x) * w).
Array weights_like(const Array& x) {
  std::vector<double> values(x.num_elements());
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.3 + 0.7 * static_cast<double>(i % 5);
  return Array::from_doubles(x.shape(), values);
}

const std::vector<double> kGeluInputs = {-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5};

Array logsumexp_input() {
  return Array::from_doubles({2, 3}, {1.0, 2.0, 3.0, 1000.0, 1000.0, 999.0});
}

// ---- relu --------------------------------------------------------------------------------------

TEST(NnRelu, KnownValuesKeepNanAndGradientIsZeroAtZero) {
  Array x = Array::from_doubles({6}, {-2.0, -0.5, 0.0, 0.5, 3.0, std::nan("")});
  std::vector<double> y = relu(x).to_doubles();
  expect_doubles_near({y.begin(), y.begin() + 5}, {0.0, 0.0, 0.0, 0.5, 3.0});
  EXPECT_TRUE(std::isnan(y[5]));
  // jax.nn.relu's custom JVP: select(x > 0, g, 0), so d relu / dx at 0 is 0.
  TreeFunction loss = [](const std::vector<Tree>& args) { return Tree(sum(relu(args[0]))); };
  Array kinks = Array::from_doubles({5}, {-2.0, -0.5, 0.0, 0.5, 3.0});
  Tree grads = grad(loss)({kinks});
  EXPECT_EQ(grads.leaf().to_doubles(), (std::vector<double>{0, 0, 0, 1, 1}));
}

TEST(NnRelu, GradientMatchesFiniteDifferences) {
  Array x = Array::from_doubles({2, 3}, {-1.5, 0.25, 2.0, 0.7, -0.1, -3.0});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) { return sum(relu(in[0]) * weights_like(in[0])); }, {x});
}

// ---- gelu --------------------------------------------------------------------------------------

TEST(NnGelu, TanhFormMatchesNumPy) {
  Array x = Array::from_doubles({7}, kGeluInputs);
  expect_doubles_near(gelu(x, /*approximate=*/true).to_doubles(),
                      {-0.0036373920817729943, -0.1588080093917233, -0.15428599017485606, 0.0,
                       0.34571400982514394, 0.8411919906082768, 2.484915733910001});
  // approximate=true is jax.nn.gelu's default.
  EXPECT_EQ(gelu(x).to_doubles(), gelu(x, true).to_doubles());
}

TEST(NnGelu, ErfFormMatchesNumPy) {
  Array x = Array::from_doubles({7}, kGeluInputs);
  expect_doubles_near(gelu(x, /*approximate=*/false).to_doubles(),
                      {-0.004049694094890287, -0.15865525393145707, -0.15426876936299344, 0.0,
                       0.34573123063700656, 0.8413447460685429, 2.4844758366855597});
}

TEST(NnGelu, GradientsMatchFiniteDifferences) {
  Array x = Array::from_doubles({7}, kGeluInputs);
  for (bool approximate : {true, false}) {
    SCOPED_TRACE(approximate ? "tanh form" : "erf form");
    expect_gradients_match_finite_differences(
        [approximate](const std::vector<Array>& in) {
          return sum(gelu(in[0], approximate) * weights_like(in[0]));
        },
        {x});
  }
}

TEST(NnGelu, ErfFormGradientHasClosedForm) {
  // d/dx [0.5 x erfc(-x/sqrt2)] = Phi(x) + x phi(x), Phi the normal CDF, phi its density.
  Array x = Array::from_doubles({7}, kGeluInputs);
  TreeFunction loss = [](const std::vector<Tree>& args) { return Tree(sum(gelu(args[0], false))); };
  std::vector<double> expected;
  for (double v : kGeluInputs) {
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double density = std::exp(-0.5 * v * v) / std::sqrt(2.0 * 3.14159265358979323846);
    expected.push_back(cdf + v * density);
  }
  expect_doubles_near(grad(loss)({x}).leaf().to_doubles(), expected, 1e-15);
}

TEST(NnGelu, IntegerInputBecomesFloat32AndF32IsCloseToF64) {
  Array ints = Array::from_ints({3}, {-1, 0, 2});
  Array y = gelu(ints);
  EXPECT_EQ(y.dtype(), DType::f32);
  Array as_f64 = gelu(Array::from_doubles({3}, {-1.0, 0.0, 2.0}));
  std::vector<double> expected = as_f64.to_doubles();
  std::vector<float> actual = y.to_floats();
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 5e-7);
}

// ---- logsumexp, log_softmax, softmax -----------------------------------------------------------

TEST(NnLogsumexp, MatchesNumPyAlongEitherAxisWithoutOverflow) {
  Array a = logsumexp_input();
  expect_doubles_near(logsumexp(a, 1).to_doubles(), {3.4076059644443806, 1000.8619948040582});
  expect_doubles_near(logsumexp(a, -1).to_doubles(), {3.4076059644443806, 1000.8619948040582});
  // Along axis 0, exp(1 - 1000) underflows to 0: the max alone.
  expect_doubles_near(logsumexp(a, 0).to_doubles(), {1000.0, 1000.0, 999.0});
  EXPECT_EQ(logsumexp(a, 1).shape(), (Shape{2}));
  EXPECT_EQ(logsumexp(a, 1, /*keepdims=*/true).shape(), (Shape{2, 1}));
}

TEST(NnLogsumexp, RowsOfMinusInfinityGiveMinusInfinityNotNan) {
  // The non-finite max is replaced by 0 before it is subtracted (jax/_src/ops/special.py).
  Array a = Array::from_doubles({2, 2}, {-kInf, -kInf, 0.0, -kInf});
  expect_doubles_near(logsumexp(a, 1).to_doubles(), {-kInf, 0.0});
}

TEST(NnLogsumexp, GradientMatchesFiniteDifferencesAndIsSoftmax) {
  Array x = Array::from_doubles({2, 3}, {0.1, -0.4, 1.3, 2.0, 0.5, -1.0});
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_gradients_match_finite_differences(
        [axis](const std::vector<Array>& in) {
          Array out = logsumexp(in[0], axis);
          return sum(out * weights_like(out));
        },
        {x});
  }
  // d logsumexp(x) / dx = softmax(x).
  TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(sum(logsumexp(args[0], 1)));
  };
  expect_doubles_near(grad(loss)({x}).leaf().to_doubles(), softmax(x, 1).to_doubles());
}

TEST(NnLogSoftmax, MatchesNumPy) {
  expect_doubles_near(log_softmax(logsumexp_input()).to_doubles(),
                      {-2.4076059644443806, -1.4076059644443804, -0.40760596444438035,
                       -0.861994804058251, -0.861994804058251, -1.861994804058251});
}

TEST(NnSoftmax, MatchesNumPyAndRowsSumToOne) {
  Array s = softmax(logsumexp_input());
  expect_doubles_near(s.to_doubles(),
                      {0.09003057317038043, 0.24472847105479767, 0.6652409557748218,
                       0.4223187982515182, 0.4223187982515182, 0.15536240349696365});
  expect_doubles_near(sum(s, {1}).to_doubles(), {1.0, 1.0});
  // Along axis 0 too (columns).
  expect_doubles_near(sum(softmax(logsumexp_input(), 0), {0}).to_doubles(), {1.0, 1.0, 1.0});
}

TEST(NnLogSoftmax, GradientsMatchFiniteDifferences) {
  Array x = Array::from_doubles({2, 3}, {0.1, -0.4, 1.3, 2.0, 0.5, -1.0});
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_gradients_match_finite_differences(
        [axis](const std::vector<Array>& in) {
          return sum(log_softmax(in[0], axis) * weights_like(in[0]));
        },
        {x});
    expect_gradients_match_finite_differences(
        [axis](const std::vector<Array>& in) {
          return sum(softmax(in[0], axis) * weights_like(in[0]));
        },
        {x});
  }
}

TEST(NnSoftmax, AxisOutOfRangeNamesTheOp) {
  Array x = Array::from_doubles({2, 3}, {0, 0, 0, 0, 0, 0});
  expect_error_mentions([&] { softmax(x, 2); }, {"softmax", "axis 2"});
  expect_error_mentions([&] { logsumexp(x, -3); }, {"logsumexp", "axis -3"});
}

// ---- one_hot -----------------------------------------------------------------------------------

TEST(NnOneHot, ComparesLabelsWithClassIndices) {
  Array labels = Array::from_ints({4}, {0, 2, -1, 3});
  Array encoded = one_hot(labels, 3);
  EXPECT_EQ(encoded.dtype(), DType::f32);
  EXPECT_EQ(encoded.shape(), (Shape{4, 3}));
  // Out-of-range labels (-1, 3) give all-zero rows, as in JAX.
  EXPECT_EQ(encoded.to_floats(), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
  Array batched = one_hot(Array::from_ints({2, 2}, {1, 0, 0, 1}), 2, DType::f64);
  EXPECT_EQ(batched.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(batched.dtype(), DType::f64);
  EXPECT_EQ(batched.to_doubles(), (std::vector<double>{0, 1, 1, 0, 1, 0, 0, 1}));
}

// ---- softmax cross-entropy ---------------------------------------------------------------------

Array ce_logits() {
  return Array::from_doubles({3, 3}, {2.0, -1.0, 0.5, 0.0, 0.0, 0.0, 10.0, 20.0, 30.0});
}
Array ce_labels() { return Array::from_ints({3}, {0, 2, 1}); }

TEST(NnSoftmaxCrossEntropy, MatchesNumPy) {
  expect_doubles_near(
      softmax_cross_entropy_with_integer_labels(ce_logits(), ce_labels()).to_doubles(),
      {0.24131129665715711, 1.0986122886681096, 10.000045400960278});
}

TEST(NnSoftmaxCrossEntropy, GradientOfBatchMeanIsSoftmaxMinusOneHotOverB) {
  TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(mean(softmax_cross_entropy_with_integer_labels(args[0], ce_labels())));
  };
  std::vector<double> probabilities = softmax(ce_logits()).to_doubles();
  std::vector<double> targets = one_hot(ce_labels(), 3, DType::f64).to_doubles();
  std::vector<double> expected;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    expected.push_back((probabilities[i] - targets[i]) / 3.0);
  }
  expect_doubles_near(grad(loss)({ce_logits()}).leaf().to_doubles(), expected);
}

TEST(NnSoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  Array logits = Array::from_doubles(
      {2, 2, 3}, {0.3, -0.2, 1.1, 0.0, 0.7, -0.5, 2.0, 1.5, -1.0, 0.25, 0.5, 0.75});
  Array labels = Array::from_ints({2, 2}, {2, 0, 1, 1});
  expect_gradients_match_finite_differences(
      [&](const std::vector<Array>& in) {
        return mean(softmax_cross_entropy_with_integer_labels(in[0], labels));
      },
      {logits});
}

TEST(NnSoftmaxCrossEntropy, RejectsFloatLabelsAndMismatchedShapes) {
  expect_error_mentions(
      [] {
        softmax_cross_entropy_with_integer_labels(ce_logits(), Array::from_doubles({3}, {0, 1, 2}));
      },
      {"softmax_cross_entropy_with_integer_labels", "labels must be integer", "f64[3]"});
  expect_error_mentions(
      [] {
        softmax_cross_entropy_with_integer_labels(ce_logits(), Array::from_ints({2}, {0, 1}));
      },
      {"softmax_cross_entropy_with_integer_labels", "i32[2]", "f64[3,3]"});
  expect_error_mentions([] { softmax_cross_entropy_with_integer_labels(ce_labels(), ce_labels()); },
                        {"logits must be floating point", "i32[3]"});
}

// ---- mse ---------------------------------------------------------------------------------------

TEST(NnMse, MatchesNumPyAndGradientIsTwoDiffOverN) {
  Array p = Array::from_doubles({3, 2}, {1.0, 2.0, 3.0, 4.0, -1.0, 0.5});
  Array t = Array::from_doubles({3, 2}, {0.5, 2.0, 1.0, 5.0, 0.0, 0.0});
  expect_doubles_near(mse(p, t).to_doubles(), {1.0833333333333333});
  EXPECT_EQ(mse(p, t).shape(), Shape{});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) { return mse(in[0], in[1]); }, {p, t});
  // d/dp mean((p - t)^2) = 2 (p - t) / N.
  TreeFunction loss = [&](const std::vector<Tree>& args) { return Tree(mse(args[0], t)); };
  std::vector<double> pv = p.to_doubles();
  std::vector<double> tv = t.to_doubles();
  std::vector<double> expected;
  for (size_t i = 0; i < pv.size(); ++i) expected.push_back(2.0 * (pv[i] - tv[i]) / 6.0);
  expect_doubles_near(grad(loss)({p}).leaf().to_doubles(), expected);
}

// ---- jit vs op by op ---------------------------------------------------------------------------

TEST(NnJit, CompositesGiveTheSameBitsInsideJitAndOpByOp) {
  // An MLP-style loss in f32 touching every function of this file.
  auto loss_fn = [](const Array& logits, const Array& labels) {
    Array h = gelu(logits) + gelu(logits, false) + relu(logits);
    Array ce = mean(softmax_cross_entropy_with_integer_labels(h, labels));
    return ce + mean(log_softmax(h)) + mean(softmax(h)) + mse(h, one_hot(labels, 3)) +
           mean(logsumexp(h, 0));
  };
  Array logits = Array::from_floats(
      {4, 3}, {0.5f, -1.25f, 2.0f, 0.0f, 3.5f, -0.75f, 1.0f, 1.0f, -2.0f, 0.25f, -0.5f, 4.0f});
  Array labels = Array::from_ints({4}, {2, 1, 0, 2});
  TreeFunction f = [&](const std::vector<Tree>& args) {
    return Tree(loss_fn(args[0].leaf(), args[1].leaf()));
  };
  const float op_by_op = loss_fn(logits, labels).to_floats()[0];
  Jitted jitted = jit(f);
  const float traced = jitted({logits, labels}).leaf().to_floats()[0];
  EXPECT_EQ(traced, op_by_op);
  // And the gradient, traced inside a jit.
  Jitted jitted_grad = jit(grad(f));
  std::vector<float> grads_jit = jitted_grad({logits, labels}).leaf().to_floats();
  std::vector<float> grads_eager = grad(f)({logits, labels}).leaf().to_floats();
  EXPECT_EQ(grads_jit, grads_eager);
  std::string program = jitted.program_text({logits, labels});
  EXPECT_THAT(program, HasSubstr("erfc"));
  EXPECT_THAT(program, HasSubstr("reduce_max"));
}

}  // namespace
}  // namespace pmap_engine
