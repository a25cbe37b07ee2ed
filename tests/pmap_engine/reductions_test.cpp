// Reductions: sum, mean, max (jnp level) over reduce_sum / reduce_max (lax level).
// Known answers come from NumPy 1.24 (/usr/bin/python3), snippets in comments; the dtype rules
// for bf16/f16 follow jax/_src/numpy/reductions.py (upcast_f16_for_computation).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "engine_test_util.h"
#include "gradient_check.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using pmap_engine::testing::ArrayFunction;
using pmap_engine::testing::error_of;
using pmap_engine::testing::expect_gradients_match_finite_differences;
using pmap_engine::testing::jitted;
using pmap_engine::testing::program_of;
using pmap_engine::testing::weighted_total;
using ::testing::HasSubstr;

// x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
Array arange_2x3x4(DType dtype = DType::f32) {
  std::vector<double> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  return astype(Array::from_doubles({2, 3, 4}, values), dtype);
}

// Distinct, irregular f64 values (no ties, so max is differentiable everywhere near them).
Array irregular(const Shape& shape, double seed = 0.3) {
  std::vector<double> values(shape_num_elements(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(seed + 1.7 * static_cast<double>(i)) * 2.0 + 0.01 * static_cast<double>(i);
  }
  return Array::from_doubles(shape, values);
}

// --- sum ---

TEST(ReductionsSum, KnownAnswersOverAxesNegativeAxesAndAll) {
  const Array x = arange_2x3x4();
  // x.sum(1) -> [[12,15,18,21],[48,51,54,57]]
  Array over_1 = sum(x, {1});
  EXPECT_EQ(over_1.shape(), (Shape{2, 4}));
  EXPECT_EQ(over_1.to_floats(), (std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57}));
  // x.sum((0, 2)) -> [60, 92, 124]; axes may be given in any order and negative.
  EXPECT_EQ(sum(x, {2, 0}).to_floats(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(sum(x, {-1, -3}).to_floats(), (std::vector<float>{60, 92, 124}));
  // x.sum(-1) -> [6, 22, 38, 54, 70, 86]
  EXPECT_EQ(sum(x, {-1}).to_floats(), (std::vector<float>{6, 22, 38, 54, 70, 86}));
  // Empty axes = every axis: 0 + 1 + ... + 23 = 276, a 0-d result.
  Array total = sum(x);
  EXPECT_EQ(total.shape(), Shape{});
  EXPECT_EQ(total.item(), 276.0);
}

TEST(ReductionsSum, KeepdimsLeavesSizeOneAxes) {
  Array kept = sum(arange_2x3x4(), {0, 2}, /*keepdims=*/true);
  EXPECT_EQ(kept.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(kept.to_floats(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(sum(arange_2x3x4(), {}, true).shape(), (Shape{1, 1, 1}));
}

TEST(ReductionsSum, ZeroSizeAxisSumsToZero) {
  Array empty = zeros({2, 0, 3});
  Array out = sum(empty, {1});
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.to_floats(), (std::vector<float>(6, 0.0f)));
}

TEST(ReductionsSum, IntegerAndBoolDtypes) {
  Array ints = Array::from_ints({2, 2}, {1, -2, 3, 4});
  Array int_sum = sum(ints, {0});
  EXPECT_EQ(int_sum.dtype(), DType::i32);
  EXPECT_EQ(int_sum.to_ints(), (std::vector<int64_t>{4, 2}));
  // i32 sums wrap modulo 2^32, as XLA's do: INT32_MAX + 1 = INT32_MIN.
  Array overflow = Array::from_ints({2}, {std::numeric_limits<int32_t>::max(), 1});
  EXPECT_EQ(sum(overflow).item(), static_cast<double>(std::numeric_limits<int32_t>::min()));
  // jnp.sum of bool counts the true values as an i32 (promote_integers).
  Array flags = greater(Array::from_floats({4}, {1, -1, 2, 0}), Array::scalar(0.0));
  Array count = sum(flags);
  EXPECT_EQ(count.dtype(), DType::i32);
  EXPECT_EQ(count.item(), 2.0);
}

// 1 + 256 * 2^-8 = 2. In bf16 (8 significant bits) 1 + 2^-8 is a tie that rounds back to 1,
// so summing in bf16 would return 1; jnp.sum computes in f32 and rounds once: 2.
TEST(ReductionsSum, HalfFloatsAreSummedInF32AndRoundedOnce) {
  std::vector<float> values(257, 1.0f / 256.0f);
  values[0] = 1.0f;
  for (DType dtype : {DType::bf16, DType::f16}) {
    Array x = astype(Array::from_floats({257}, values), dtype);
    Array total = sum(x);
    EXPECT_EQ(total.dtype(), dtype);
    EXPECT_EQ(total.item(), 2.0) << dtype_name(dtype);
    EXPECT_EQ(jitted([](const std::vector<Array>& a) { return sum(a[0]); }, {x}).item(), 2.0);
  }
  std::string program = program_of([](const std::vector<Array>& a) { return sum(a[0]); },
                                   {astype(Array::from_floats({4}, {1, 2, 3, 4}), DType::bf16)});
  EXPECT_THAT(program, HasSubstr("reduce_sum[axes=(0,)]"));
  EXPECT_THAT(program, HasSubstr("f32[]"));   // the sum itself is an f32
  EXPECT_THAT(program, HasSubstr("bf16[]"));  // cast back
}

TEST(ReductionsSum, ErrorsNameTheOpTheArrayAndTheAxis) {
  const Array x = arange_2x3x4();
  std::string message = error_of([&] { sum(x, {3}); });
  EXPECT_THAT(message, HasSubstr("sum: axis 3 is out of bounds for array of dimension 3"));
  EXPECT_THAT(message, HasSubstr("f32[2,3,4]"));
  EXPECT_THAT(error_of([&] { sum(x, {-4}); }), HasSubstr("axis -4"));
  message = error_of([&] { mean(x, {1, -2}); });
  EXPECT_THAT(message, HasSubstr("mean: duplicate value in 'axis'"));
  EXPECT_THAT(message, HasSubstr("f32[2,3,4]"));
}

TEST(ReductionsSum, GradientMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return weighted_total(sum(a[0], {1})); },
      {irregular({2, 3, 4})});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(sum(a[0], {0, -1}, true));
      },
      {irregular({2, 3, 4})});
  // Broadcasting on the way in: x [3, 4] * b [4] summed over rows.
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return weighted_total(sum(a[0] * a[1], {0})); },
      {irregular({3, 4}), irregular({4}, 1.1)});
}

TEST(ReductionsSum, GradientIsTheBroadcastCotangent) {
  Tree grads = grad([](const std::vector<Tree>& args) {
    return Tree(sum(sum(args[0].leaf(), {1}) * Array::from_floats({2}, {1, 10})));
  })({Tree(Array::from_floats({2, 3}, {1, 2, 3, 4, 5, 6}))});
  EXPECT_EQ(grads.leaf().to_floats(), (std::vector<float>{1, 1, 1, 10, 10, 10}));
}

// --- mean ---

TEST(ReductionsMean, KnownAnswersAndDtypes) {
  const Array x = arange_2x3x4();
  // x.mean(1) -> [[4,5,6,7],[16,17,18,19]]
  EXPECT_EQ(mean(x, {1}).to_floats(), (std::vector<float>{4, 5, 6, 7, 16, 17, 18, 19}));
  EXPECT_EQ(mean(x).item(), 11.5);
  Array kept = mean(x, {-1}, true);
  EXPECT_EQ(kept.shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(kept.to_floats(), (std::vector<float>{1.5, 5.5, 9.5, 13.5, 17.5, 21.5}));
  // Integer input gives f32 (dtypes.to_inexact_dtype): mean([1, 2]) = 1.5.
  Array int_mean = mean(Array::from_ints({2}, {1, 2}));
  EXPECT_EQ(int_mean.dtype(), DType::f32);
  EXPECT_EQ(int_mean.item(), 1.5);
  EXPECT_EQ(mean(arange_2x3x4(DType::f64), {0}).dtype(), DType::f64);
  // An empty mean is 0 / 0.
  EXPECT_TRUE(std::isnan(mean(zeros({0})).item()));
}

// The bf16 mean of 257 values summing to 2 is 2/257 computed in f32, then rounded to bf16.
TEST(ReductionsMean, HalfFloatsAreAveragedInF32) {
  std::vector<float> values(257, 1.0f / 256.0f);
  values[0] = 1.0f;
  Array x = astype(Array::from_floats({257}, values), DType::bf16);
  Array average = mean(x);
  EXPECT_EQ(average.dtype(), DType::bf16);
  EXPECT_EQ(average.item(), static_cast<double>(bf16_to_f32(f32_to_bf16(2.0f / 257.0f))));
}

TEST(ReductionsMean, GradientMatchesFiniteDifferencesAndJitAgrees) {
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(mean(a[0], {0, 2}));
      },
      {irregular({2, 3, 4})});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return mean(a[0] - a[1]); },
      {irregular({3, 2}), irregular({2}, 0.9)});
  const Array x = irregular({3, 5});
  ArrayFunction f = [](const std::vector<Array>& a) { return mean(a[0], {1}, true); };
  EXPECT_EQ(jitted(f, {x}).to_doubles(), f({x}).to_doubles());
}

// --- max ---

TEST(ReductionsMax, KnownAnswersAndDtypes) {
  const Array x = arange_2x3x4();
  // x.max(0) -> 12 .. 23
  std::vector<float> expected(12);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = 12.0f + static_cast<float>(i);
  EXPECT_EQ(max(x, {0}).to_floats(), expected);
  EXPECT_EQ(max(x).item(), 23.0);
  EXPECT_EQ(max(x, {1, 2}, true).shape(), (Shape{2, 1, 1}));
  Array ints = Array::from_ints({3}, {-7, std::numeric_limits<int32_t>::min(), -3});
  EXPECT_EQ(max(ints).item(), -3.0);
  EXPECT_EQ(max(ints).dtype(), DType::i32);
  Array flags = greater(Array::from_floats({3}, {-1, 2, -3}), Array::scalar(0.0));
  EXPECT_EQ(max(flags).dtype(), DType::bool_);
  EXPECT_EQ(max(flags).item(), 1.0);
  EXPECT_EQ(max(astype(Array::from_floats({3}, {0.5f, -2.0f, 0.25f}), DType::bf16)).item(), 0.5);
}

// lax.max propagates NaN, wherever it sits in the group; -inf is an ordinary value.
TEST(ReductionsMax, PropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Array x = Array::from_floats({3, 3}, {nan, 1, 2, 3, nan, 4, -inf, -inf, -inf});
  std::vector<float> rows = max(x, {1}).to_floats();
  EXPECT_TRUE(std::isnan(rows[0]));
  EXPECT_TRUE(std::isnan(rows[1]));
  EXPECT_EQ(rows[2], -inf);
}

TEST(ReductionsMax, ZeroSizeReductionIsAnError) {
  std::string message = error_of([] { max(zeros({2, 0}), {1}); });
  EXPECT_THAT(message, HasSubstr("max: zero-size array to reduction operation max"));
  EXPECT_THAT(message, HasSubstr("f32[2,0]"));
  // Reducing only the non-empty axis is fine: an empty result.
  EXPECT_EQ(max(zeros({2, 0}), {0}).shape(), (Shape{0}));
}

TEST(ReductionsMax, GradientMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return weighted_total(max(a[0], {1})); },
      {irregular({3, 4})});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(max(a[0], {0, 2}, true));
      },
      {irregular({2, 3, 4})});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return max(a[0] * a[1]); },
      {irregular({3, 2}), irregular({2}, 2.0)});
}

// _reduce_chooser_jvp_rule: ties share the cotangent equally.
TEST(ReductionsMax, TiedMaximaShareTheGradient) {
  TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree(sum(max(args[0].leaf(), {1}) * Array::from_floats({2}, {1, 6})));
  };
  Array x = Array::from_floats({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0});
  std::vector<float> expected{0, 0.5, 0.5, 0, 2, 2, 2, 0};
  EXPECT_EQ(grad(f)({Tree(x)}).leaf().to_floats(), expected);
  Jitted jitted_grad = jit(grad(f));
  EXPECT_EQ(jitted_grad({Tree(x)}).leaf().to_floats(), expected);
}

TEST(ReductionsMax, JitMatchesOpByOpAndPrintsTheProgram) {
  const Array x = irregular({4, 3});
  ArrayFunction f = [](const std::vector<Array>& a) { return max(a[0], {-1}); };
  EXPECT_EQ(jitted(f, {x}).to_doubles(), f({x}).to_doubles());
  EXPECT_THAT(program_of(f, {x}), HasSubstr("reduce_max[axes=(1,)]"));
}

}  // namespace
}  // namespace pmap_engine
