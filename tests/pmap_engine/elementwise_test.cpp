// Element-wise ops, broadcasting and dtype promotion, constants and conversions: known answers
// (by hand, or from NumPy 1.24.2 with the snippet in a comment), finite-difference gradients
// in f64, the JAX-specific VJP choices (tie splitting, abs at 0), error messages, and the same
// ops inside jit and op by op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gradient_check.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using testing::ArrayFunction;
using testing::as_tree_function;
using testing::expect_error_mentions;
using testing::expect_gradients_match_finite_differences;
using testing::program_of;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

Array f32(Shape shape, std::vector<float> values) { return Array::from_floats(shape, values); }
Array f64(Shape shape, std::vector<double> values) { return Array::from_doubles(shape, values); }
Array i32(Shape shape, std::vector<int32_t> values) { return Array::from_ints(shape, values); }

// A scalar loss that weighs every element differently, so a gradient check sees each one.
Array weighted_sum(const Array& y) {
  std::vector<double> weights(y.num_elements());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.5 + 0.25 * static_cast<double>(i);
  return sum(astype(y, DType::f64) * Array::from_doubles(y.shape(), weights));
}

// =============================== Elementwise: forward values ===============================

TEST(ElementwiseArithmetic, BinaryOpsOnEqualShapes) {
  Array x = f32({4}, {1, -2, 3.5f, 0});
  Array y = f32({4}, {4, 0.5f, -1, 2});
  EXPECT_THAT((x + y).to_floats(), ElementsAre(5, -1.5f, 2.5f, 2));
  EXPECT_THAT((x - y).to_floats(), ElementsAre(-3, -2.5f, 4.5f, -2));
  EXPECT_THAT((x * y).to_floats(), ElementsAre(4, -1, -3.5f, 0));
  EXPECT_THAT((x / y).to_floats(), ElementsAre(0.25f, -4, -3.5f, 0));
  EXPECT_THAT(maximum(x, y).to_floats(), ElementsAre(4, 0.5f, 3.5f, 2));
  EXPECT_THAT(minimum(x, y).to_floats(), ElementsAre(1, -2, -1, 0));
  EXPECT_EQ((x + y).dtype(), DType::f32);
}

TEST(ElementwiseArithmetic, ScalarOperandsOnEitherSide) {
  Array x = f32({3}, {1, 2, 4});
  EXPECT_THAT((x + 1.0).to_floats(), ElementsAre(2, 3, 5));
  EXPECT_THAT((1.0 - x).to_floats(), ElementsAre(0, -1, -3));
  EXPECT_THAT((x * 0.5).to_floats(), ElementsAre(0.5f, 1, 2));
  EXPECT_THAT((8.0 / x).to_floats(), ElementsAre(8, 4, 2));
  EXPECT_THAT((x - 1.0).to_floats(), ElementsAre(0, 1, 3));
  EXPECT_THAT((x / 2.0).to_floats(), ElementsAre(0.5f, 1, 2));
  EXPECT_THAT((3.0 + x).to_floats(), ElementsAre(4, 5, 7));
  EXPECT_THAT((2.0 * x).to_floats(), ElementsAre(2, 4, 8));
  EXPECT_THAT((-x).to_floats(), ElementsAre(-1, -2, -4));
}

TEST(ElementwiseUnary, TranscendentalsMatchNumPy) {
  // /usr/bin/python3: np.exp([-1., 0., .5, 2.]), np.log([.5, 1., 2., 10.]),
  // np.tanh([-2., -.5, 0., 1.]), np.sqrt([.25, 2., 9.]), 1/np.sqrt(...) (float64)
  // Within 4 ulps (DoubleEq): NumPy's vectorised loops and glibc may differ in the last bit.
  EXPECT_THAT(exp(f64({4}, {-1, 0, 0.5, 2})).to_doubles(),
              Pointwise(DoubleEq(), {0.3678794411714424, 1.0, 1.6487212707001282, 7.38905609893065}));
  EXPECT_THAT(log(f64({4}, {0.5, 1, 2, 10})).to_doubles(),
              Pointwise(DoubleEq(), {-0.6931471805599453, 0.0, 0.6931471805599453, 2.3025850929940455}));
  EXPECT_THAT(tanh(f64({4}, {-2, -0.5, 0, 1})).to_doubles(),
              Pointwise(DoubleEq(), {-0.9640275800758169, -0.46211715726000974, 0.0, 0.7615941559557649}));
  EXPECT_THAT(sqrt(f64({3}, {0.25, 2, 9})).to_doubles(),
              ElementsAre(0.5, 1.4142135623730951, 3.0));  // correctly rounded: exact
  EXPECT_THAT(rsqrt(f64({3}, {0.25, 2, 9})).to_doubles(),
              Pointwise(DoubleEq(), {2.0, 0.7071067811865475, 0.3333333333333333}));
  // np.exp(np.float32([1, 2, 3])); a float32 kernel computes in float32.
  std::vector<float> e = exp(f32({3}, {1, 2, 3})).to_floats();
  EXPECT_FLOAT_EQ(e[0], 2.7182819843292236f);
  EXPECT_FLOAT_EQ(e[1], 7.3890557289123535f);
  EXPECT_FLOAT_EQ(e[2], 20.08553695678711f);
}

TEST(ElementwiseUnary, AbsSignSquareNeg) {
  Array x = f64({5}, {-2.5, -0.0, 0.0, 3, kNaN});
  std::vector<double> a = abs(x).to_doubles();
  EXPECT_THAT(std::vector<double>(a.begin(), a.end() - 1), ElementsAre(2.5, 0, 0, 3));
  EXPECT_TRUE(std::isnan(a[4]));
  std::vector<double> s = sign(x).to_doubles();
  EXPECT_EQ(s[0], -1);
  EXPECT_EQ(s[1], 0);
  EXPECT_TRUE(std::signbit(s[1]));  // lax.sign(-0.) is -0.
  EXPECT_EQ(s[2], 0);
  EXPECT_EQ(s[3], 1);
  EXPECT_TRUE(std::isnan(s[4]));
  EXPECT_THAT(square(f32({3}, {-3, 0.5f, 2})).to_floats(), ElementsAre(9, 0.25f, 4));
  EXPECT_THAT(sign(i32({3}, {-7, 0, 9})).to_ints(), ElementsAre(-1, 0, 1));
  EXPECT_THAT(abs(i32({2}, {-7, 9})).to_ints(), ElementsAre(7, 9));
  EXPECT_THAT(neg(i32({2}, {-7, 9})).to_ints(), ElementsAre(7, -9));
  Array u = Array::from_uints({2}, {3, 5});
  EXPECT_EQ(abs(u).dtype(), DType::u32);  // jnp.absolute leaves unsigned arrays as they are
  EXPECT_THAT(abs(u).to_ints(), ElementsAre(3, 5));
}

TEST(ElementwiseUnary, IntegerInputsOfTranscendentalsBecomeF32) {
  // jnp.exp(jnp.int32(0)) is a float32 (promote_args_inexact).
  Array e = exp(i32({2}, {0, 1}));
  EXPECT_EQ(e.dtype(), DType::f32);
  EXPECT_FLOAT_EQ(e.to_floats()[1], std::exp(1.0f));
  EXPECT_EQ(sqrt(i32({1}, {4})).to_floats()[0], 2.0f);
}

TEST(ElementwiseArithmetic, MaxAndMinPropagateNaN) {
  Array x = f32({3}, {1, NAN, 2});
  Array y = f32({3}, {NAN, 0, 1});
  for (const Array& r : {maximum(x, y), minimum(x, y)}) {
    std::vector<float> v = r.to_floats();
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_TRUE(std::isnan(v[1]));
  }
  EXPECT_EQ(maximum(x, y).to_floats()[2], 2);
  EXPECT_EQ(minimum(x, y).to_floats()[2], 1);
}

TEST(ElementwiseArithmetic, IntegerArithmeticWrapsAndDivisionIsTrueDivide) {
  Array big = i32({2}, {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});
  EXPECT_THAT((big + 1.0).to_ints(), ElementsAre(std::numeric_limits<int32_t>::min(),
                                                 std::numeric_limits<int32_t>::min() + 1));
  EXPECT_THAT((big * 2.0).to_ints(), ElementsAre(-2, 0));
  EXPECT_EQ((big + 1.0).dtype(), DType::i32);
  // jnp.array([7, -7]) / 2 == [3.5, -3.5] float32 (jnp.divide is true_divide).
  Array quotient = i32({2}, {7, -7}) / i32({2}, {2, 2});
  EXPECT_EQ(quotient.dtype(), DType::f32);
  EXPECT_THAT(quotient.to_floats(), ElementsAre(3.5f, -3.5f));
  EXPECT_THAT((i32({1}, {3}) / 2.0).to_floats(), ElementsAre(1.5f));
}

TEST(ElementwiseArithmetic, UnsignedAndBoolOperands) {
  Array u = Array::from_uints({3}, {0, 5, 4294967295u});
  // u32 arithmetic wraps modulo 2^32, as XLA's does.
  EXPECT_THAT((u - 1.0).to_ints(), ElementsAre(4294967295LL, 4, 4294967294LL));
  EXPECT_THAT((u + 1.0).to_ints(), ElementsAre(1, 6, 0));
  EXPECT_EQ((u * 2.0).dtype(), DType::u32);
  // lax.max/min accept bool: logical or / and.
  Array p = greater(f32({4}, {1, 1, 0, 0}), Array::scalar(0.5));
  Array q = greater(f32({4}, {1, 0, 1, 0}), Array::scalar(0.5));
  EXPECT_THAT(maximum(p, q).to_ints(), ElementsAre(1, 1, 1, 0));
  EXPECT_THAT(minimum(p, q).to_ints(), ElementsAre(1, 0, 0, 0));
  EXPECT_EQ(maximum(p, q).dtype(), DType::bool_);
}

TEST(ElementwiseLowPrecision, Bf16RoundsToNearestEvenAfterEachOp) {
  // bf16 has 8 significant bits: near 1 the spacing is 2^-7. 1 + 1.5 * 2^-7 lies halfway
  // between 1 + 2^-7 and 1 + 2^-6 and rounds to the even one, 1 + 2^-6 = 1.015625;
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and rounds to 1.
  Array one = astype(f32({2}, {1, 1}), DType::bf16);
  Array step = astype(f32({2}, {0.01171875f, 0.00390625f}), DType::bf16);
  Array sum_bf16 = one + step;
  EXPECT_EQ(sum_bf16.dtype(), DType::bf16);
  EXPECT_THAT(sum_bf16.to_floats(), ElementsAre(1.015625f, 1.0f));
  // bf16 * 3.0 keeps bf16 (a Python scalar is weakly typed).
  EXPECT_EQ((one * 3.0).dtype(), DType::bf16);
}

TEST(ElementwiseLowPrecision, F16RoundsToNearestEven) {
  // f16 has 11 significant bits: at 2048 the spacing is 2, so 2048 + 1 -> 2048 and
  // 2048 + 3 = 2051 -> 2052 (ties to even).
  Array x = astype(f32({2}, {2048, 2048}), DType::f16);
  Array y = astype(f32({2}, {1, 3}), DType::f16);
  Array z = x + y;
  EXPECT_EQ(z.dtype(), DType::f16);
  EXPECT_THAT(z.to_floats(), ElementsAre(2048, 2052));
  EXPECT_FLOAT_EQ(exp(astype(f32({1}, {0}), DType::f16)).to_floats()[0], 1.0f);
}

TEST(ElementwiseCompare, ComparisonsGiveBoolAndHandleNaN) {
  Array x = f32({4}, {1, 2, 3, NAN});
  Array y = f32({4}, {2, 2, 2, NAN});
  EXPECT_EQ(equal(x, y).dtype(), DType::bool_);
  EXPECT_THAT(equal(x, y).to_ints(), ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(not_equal(x, y).to_ints(), ElementsAre(1, 0, 1, 1));
  EXPECT_THAT(less(x, y).to_ints(), ElementsAre(1, 0, 0, 0));
  EXPECT_THAT(less_equal(x, y).to_ints(), ElementsAre(1, 1, 0, 0));
  EXPECT_THAT(greater(x, y).to_ints(), ElementsAre(0, 0, 1, 0));
  EXPECT_THAT(greater_equal(x, y).to_ints(), ElementsAre(0, 1, 1, 0));
  // Mixed dtypes compare after promotion: i32 2 == f32 2.
  EXPECT_THAT(equal(i32({2}, {2, 3}), f32({2}, {2, 2.5f})).to_ints(), ElementsAre(1, 0));
}

TEST(ElementwiseWhere, SelectsAndBroadcasts) {
  Array condition = greater(f32({2, 1}, {1, 0}), Array::scalar(0.5));
  Array if_true = f32({3}, {1, 2, 3});
  Array if_false = Array::scalar(-1.0);
  Array r = where(condition, if_true, if_false);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_THAT(r.to_floats(), ElementsAre(1, 2, 3, -1, -1, -1));
  // A non-bool condition means `condition != 0`; branches promote (i32 with f32 -> f32).
  Array r2 = where(i32({3}, {0, 5, -1}), i32({3}, {1, 2, 3}), f32({3}, {0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(r2.dtype(), DType::f32);
  EXPECT_THAT(r2.to_floats(), ElementsAre(0.5f, 2, 3));
}

// =============================== Elementwise: gradients =====================================

TEST(ElementwiseGradient, BinaryOpsMatchFiniteDifferences) {
  Array x = f64({2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 3.0});
  Array y = f64({2, 3}, {1.5, 0.75, -2.5, 0.25, 2.0, -1.0});
  using Fn = std::function<Array(const Array&, const Array&)>;
  std::vector<std::pair<std::string, Fn>> ops = {
      {"add", [](const Array& a, const Array& b) { return a + b; }},
      {"sub", [](const Array& a, const Array& b) { return a - b; }},
      {"mul", [](const Array& a, const Array& b) { return a * b; }},
      {"div", [](const Array& a, const Array& b) { return a / b; }},
      {"maximum", [](const Array& a, const Array& b) { return maximum(a, b); }},
      {"minimum", [](const Array& a, const Array& b) { return minimum(a, b); }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    expect_gradients_match_finite_differences(
        [op = op](const std::vector<Array>& in) { return weighted_sum(op(in[0], in[1])); }, {x, y});
  }
}

TEST(ElementwiseGradient, UnaryOpsMatchFiniteDifferences) {
  Array positive = f64({4}, {0.3, 1.0, 2.5, 4.0});
  Array mixed = f64({4}, {-1.5, -0.2, 0.7, 2.0});
  using Fn = std::function<Array(const Array&)>;
  std::vector<std::tuple<std::string, Fn, Array>> ops = {
      {"neg", [](const Array& a) { return -a; }, mixed},
      {"exp", [](const Array& a) { return exp(a); }, mixed},
      {"log", [](const Array& a) { return log(a); }, positive},
      {"tanh", [](const Array& a) { return tanh(a); }, mixed},
      {"sqrt", [](const Array& a) { return sqrt(a); }, positive},
      {"rsqrt", [](const Array& a) { return rsqrt(a); }, positive},
      {"abs", [](const Array& a) { return abs(a); }, mixed},
      {"sign", [](const Array& a) { return sign(a) * a; }, mixed},
      {"square", [](const Array& a) { return square(a); }, mixed},
      {"scalars", [](const Array& a) { return (2.0 - a) / 3.0 + 1.5 * a; }, mixed},
  };
  for (const auto& [name, op, input] : ops) {
    SCOPED_TRACE(name);
    expect_gradients_match_finite_differences(
        [op = op](const std::vector<Array>& in) { return weighted_sum(op(in[0])); }, {input});
  }
}

TEST(ElementwiseGradient, BroadcastingOperandsReceiveSummedCotangents) {
  Array matrix = f64({2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 3.0});
  Array row = f64({3}, {1.5, 0.75, -2.5});
  Array column = f64({2, 1}, {0.25, 2.0});
  Array scalar = Array::scalar(1.75, DType::f64);
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) { return weighted_sum(in[0] * in[1] + in[2] / in[3]); },
      {matrix, row, column, scalar});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) { return weighted_sum(maximum(in[0], in[1]) - in[2]); },
      {column, row, scalar});
  // Closed form: d/d row of sum(matrix + row) is the number of rows.
  Tree grads = grad(as_tree_function([](const std::vector<Array>& in) { return sum(in[0] + in[1]); }),
                    {1})({matrix, row});
  EXPECT_EQ(grads.leaf().shape(), (Shape{3}));
  EXPECT_THAT(grads.leaf().to_doubles(), ElementsAre(2, 2, 2));
}

TEST(ElementwiseGradient, WhereRoutesCotangentsToTheChosenBranch) {
  Array condition = greater(f64({4}, {1, 0, 1, 0}), Array::scalar(0.5, DType::f64));
  Array t = f64({4}, {0.5, -1, 2, 3});
  Array f = f64({4}, {1.5, 2.5, -0.5, 0.25});
  expect_gradients_match_finite_differences(
      [condition](const std::vector<Array>& in) {
        return weighted_sum(where(condition, in[0] * in[0], exp(in[1])));
      },
      {t, f});
  Tree grads = grad(as_tree_function([condition](const std::vector<Array>& in) {
                      return sum(where(condition, in[0], in[1]));
                    }),
                    {0, 1})({t, f});
  EXPECT_THAT(grads[0].leaf().to_doubles(), ElementsAre(1, 0, 1, 0));
  EXPECT_THAT(grads[1].leaf().to_doubles(), ElementsAre(0, 1, 0, 1));
}

TEST(ElementwiseGradient, MaxAndMinSplitTiesEvenly) {
  // lax.py's _balanced_eq: where x == y each operand gets half the cotangent.
  Array x = f64({3}, {1, 2, 3});
  Array y = f64({3}, {1, 5, 0});
  for (bool use_max : {true, false}) {
    SCOPED_TRACE(use_max ? "maximum" : "minimum");
    Tree grads = grad(as_tree_function([use_max](const std::vector<Array>& in) {
                        return sum(use_max ? maximum(in[0], in[1]) : minimum(in[0], in[1]));
                      }),
                      {0, 1})({x, y});
    std::vector<double> gx = grads[0].leaf().to_doubles();
    std::vector<double> gy = grads[1].leaf().to_doubles();
    EXPECT_THAT(gx, ElementsAre(0.5, use_max ? 0 : 1, use_max ? 1 : 0));
    EXPECT_THAT(gy, ElementsAre(0.5, use_max ? 1 : 0, use_max ? 0 : 1));
  }
}

TEST(ElementwiseGradient, AbsAtZeroHasSlopeOneAsInJax) {
  // lax.py's _abs_jvp_rule: select(x >= 0, g, -g).
  Tree g = grad(as_tree_function([](const std::vector<Array>& in) { return sum(abs(in[0])); }))(
      {f64({3}, {-2, 0, 2})});
  EXPECT_THAT(g.leaf().to_doubles(), ElementsAre(-1, 1, 1));
  Tree s = grad(as_tree_function([](const std::vector<Array>& in) { return sum(sign(in[0])); }))(
      {f64({2}, {-2, 3})});
  EXPECT_THAT(s.leaf().to_doubles(), ElementsAre(0, 0));
}

// =============================== Elementwise: errors, jit ===================================

TEST(ElementwiseErrors, IncompatibleShapesNameOpAndBothTypes) {
  expect_error_mentions(
      [] {
        (void)add(Array::from_floats({3, 4}, std::vector<float>(12)), f32({5}, {1, 2, 3, 4, 5}));
      },
      {"add: incompatible shapes f32[3,4] and f32[5]"});
  expect_error_mentions(
      [] {
        (void)mul(f32({2}, {1, 2}), f64({3}, {1, 2, 3}));
      },
      {"mul", "f32[2]", "f64[3]"});
  expect_error_mentions(
      [] {
        (void)less(f32({2}, {1, 2}), f32({3}, {1, 2, 3}));
      },
      {"lt", "f32[2]", "f32[3]"});
  expect_error_mentions(
      [] {
        (void)where(greater(f32({2}, {1, 2}), Array::scalar(0)), f32({3}, {1, 2, 3}),
                    Array::scalar(0));
      },
      {"where", "bool[2]", "f32[3]"});
}

TEST(ElementwiseErrors, UnsupportedDtypesNameTheOp) {
  Array flags = greater(f32({2}, {1, 0}), Array::scalar(0.5));
  expect_error_mentions([&] { (void)neg(flags); }, {"neg", "bool"});
  expect_error_mentions([&] { (void)add(flags, flags); }, {"add", "bool[2]", "astype"});
  expect_error_mentions([] { (void)add(i32({1}, {1}), Array::from_uints({1}, {1})); },
                        {"add", "i32", "u32", "astype"});
  expect_error_mentions([] { (void)(Array::from_uints({1}, {1}) + -1.0); },
                        {"add", "out of range", "u32"});
  expect_error_mentions([] { (void)add(Array(), f32({1}, {1})); }, {"add", "empty Array"});
}

TEST(ElementwiseErrors, ErrorsAlsoRaiseWhileTracing) {
  expect_error_mentions(
      [] {
        testing::jitted([](const std::vector<Array>& in) { return in[0] + in[1]; },
                        {f32({2, 2}, {1, 2, 3, 4}), f32({3}, {1, 2, 3})});
      },
      {"add: incompatible shapes f32[2,2] and f32[3]"});
}

TEST(ElementwiseJit, JittedAndOpByOpResultsAgree) {
  ArrayFunction fn = [](const std::vector<Array>& in) {
    const Array& x = in[0];  // [2, 3]
    const Array& b = in[1];  // [3]
    Array h = tanh(x * 0.5 + b) - sqrt(abs(x) + 1.0);
    return where(greater(h, scalar_like(h, 0.0)), exp(h), maximum(h, minimum(-h, Array::scalar(0.25))) / 2.0);
  };
  Array x = f32({2, 3}, {0.5f, -1.25f, 2, 1.5f, -0.75f, 3});
  Array b = f32({3}, {0.25f, 1, -0.5f});
  std::vector<float> eager = fn({x, b}).to_floats();
  std::vector<float> jitted = testing::jitted(fn, {x, b}).to_floats();
  EXPECT_THAT(jitted, ElementsAreArray(eager));
  DisableJit disabled;
  EXPECT_THAT(testing::jitted(fn, {x, b}).to_floats(), ElementsAreArray(eager));
}

TEST(ElementwiseJit, ProgramShowsRankPromotionAndScalarLiterals) {
  // As jnp traces x[2,3] + b[3]: b is broadcast to [1,3] and lax's add broadcasts the unit
  // dimension; a Python scalar stays a 0-d operand of mul.
  std::string text = program_of(
      [](const std::vector<Array>& in) { return (in[0] + in[1]) * 2.0; },
      {f32({2, 3}, std::vector<float>(6)), f32({3}, {1, 2, 3})});
  EXPECT_THAT(text, HasSubstr("f32[1,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 3)]"));
  EXPECT_THAT(text, HasSubstr("f32[2,3] = add"));
  EXPECT_THAT(text, HasSubstr("f32[2,3] = mul"));
  // Promotion records a convert_element_type.
  std::string promoted = program_of([](const std::vector<Array>& in) { return in[0] + in[1]; },
                                    {i32({2}, {1, 2}), f32({2}, {1, 2})});
  EXPECT_THAT(promoted, HasSubstr("convert_element_type[new_dtype=f32 weak_type=False]"));
}

TEST(ElementwiseJit, GradientInsideJitMatchesEager) {
  TreeFunction loss = as_tree_function([](const std::vector<Array>& in) {
    return sum(tanh(in[0] * in[1]) / (in[1] + 2.0));
  });
  std::vector<Tree> args = {f64({2, 2}, {0.5, -1, 1.5, 2}), f64({2}, {0.25, -0.5})};
  Tree eager = grad(loss, {0, 1})(args);
  Tree jitted = jit(grad(loss, {0, 1}))(args);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_THAT(jitted[i].leaf().to_doubles(), ElementsAreArray(eager[i].leaf().to_doubles()));
  }
}

// =============================== Broadcasting and promotion ================================

TEST(BroadcastingShapes, NumPyRulesIncludingZeroSizes) {
  EXPECT_EQ((f32({2, 1}, {1, 2}) + f32({3}, {1, 2, 3})).shape(), (Shape{2, 3}));
  EXPECT_EQ((Array::scalar(1) + f32({1, 1, 2}, {1, 2})).shape(), (Shape{1, 1, 2}));
  Array empty = Array::from_floats({0, 3}, {});
  EXPECT_EQ((empty + f32({1, 3}, {1, 2, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ((empty * f32({3}, {1, 2, 3})).shape(), (Shape{0, 3}));
  Array column = f32({2, 1}, {10, 20});
  Array row = f32({1, 3}, {1, 2, 3});
  EXPECT_THAT((column + row).to_floats(), ElementsAre(11, 12, 13, 21, 22, 23));
  EXPECT_THAT((row - column).to_floats(), ElementsAre(-9, -8, -7, -19, -18, -17));
}

TEST(BroadcastingPromotion, DtypesPromoteAsJnp) {
  auto type_of_sum = [](DType a, DType b) {
    return (astype(f32({1}, {1}), a) + astype(f32({1}, {1}), b)).dtype();
  };
  EXPECT_EQ(type_of_sum(DType::f32, DType::f32), DType::f32);
  EXPECT_EQ(type_of_sum(DType::bf16, DType::f32), DType::f32);
  EXPECT_EQ(type_of_sum(DType::f16, DType::f32), DType::f32);
  EXPECT_EQ(type_of_sum(DType::bf16, DType::f16), DType::f32);
  EXPECT_EQ(type_of_sum(DType::f32, DType::f64), DType::f64);
  EXPECT_EQ(type_of_sum(DType::bf16, DType::f64), DType::f64);
  EXPECT_EQ(type_of_sum(DType::i32, DType::f16), DType::f16);
  EXPECT_EQ(type_of_sum(DType::u32, DType::f32), DType::f32);
  EXPECT_EQ(type_of_sum(DType::bool_, DType::i32), DType::i32);
  EXPECT_EQ(type_of_sum(DType::bool_, DType::bf16), DType::bf16);
  EXPECT_EQ(type_of_sum(DType::u32, DType::u32), DType::u32);
}

TEST(BroadcastingPromotion, PythonScalarsAreWeaklyTyped) {
  EXPECT_EQ((astype(f32({1}, {1}), DType::f16) * 2.0).dtype(), DType::f16);
  EXPECT_EQ((f64({1}, {1}) + 0.1).dtype(), DType::f64);
  EXPECT_EQ((f64({1}, {1}) + 0.1).to_doubles()[0], 1.1);  // 0.1 kept at f64 precision
  EXPECT_EQ((i32({1}, {3}) + 1.0).dtype(), DType::i32);   // a Python int keeps i32
  // A Python float next to an integer array: jnp gives the default float.
  Array half = i32({2}, {3, 4}) * 0.5;
  EXPECT_EQ(half.dtype(), DType::f32);
  EXPECT_THAT(half.to_floats(), ElementsAre(1.5f, 2));
  Array flags = greater(f32({2}, {1, 0}), Array::scalar(0.5));
  EXPECT_EQ((flags + 1.0).dtype(), DType::i32);  // bool + Python int -> int32
  EXPECT_THAT((flags + 1.0).to_ints(), ElementsAre(2, 1));
}

// ================================ Constants and conversions ================================

TEST(ConstantsFull, FullZerosOnesAndLikes) {
  EXPECT_THAT(full({2, 2}, 1.5).to_floats(), ElementsAre(1.5f, 1.5f, 1.5f, 1.5f));
  EXPECT_EQ(full({2}, 3, DType::i32).dtype(), DType::i32);
  EXPECT_THAT(zeros({3}, DType::f64).to_doubles(), ElementsAre(0, 0, 0));
  EXPECT_THAT(ones({2}, DType::bf16).to_floats(), ElementsAre(1, 1));
  Array x = i32({2, 1}, {4, 5});
  EXPECT_EQ(zeros_like(x).shape(), (Shape{2, 1}));
  EXPECT_EQ(ones_like(x).dtype(), DType::i32);
  EXPECT_THAT(ones_like(x).to_ints(), ElementsAre(1, 1));
  Array s = scalar_like(x, 7);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::i32);
  EXPECT_EQ(full({}, 2.5).shape(), Shape{});
  EXPECT_EQ(full({0, 4}, 1).num_elements(), 0u);
  expect_error_mentions([] { (void)full({2, -1}, 0); }, {"full", "[2,-1]", "negative"});
}

TEST(ConstantsFull, InsideJitAConstantIsOneBroadcastOfALiteral) {
  std::string text = program_of([](const std::vector<Array>& in) { return in[0] + zeros({2, 3}); },
                                {f32({2, 3}, std::vector<float>(6))});
  EXPECT_THAT(text, HasSubstr("f32[2,3] = broadcast_in_dim[broadcast_dimensions=() shape=(2, 3)]"));
  // The literal is a 0-d constant of the program printed inline, as in a jaxpr, not a
  // materialised [2,3] array.
  EXPECT_THAT(text, HasSubstr("shape=(2, 3)] 0.0:f32[]"));
}

TEST(ConstantsConvert, FloatToIntegerTruncatesSaturatesAndZeroesNaN) {
  Array x = f32({6}, {2.7f, -2.7f, 1e10f, -1e10f, NAN, 0.5f});
  EXPECT_THAT(astype(x, DType::i32).to_ints(),
              ElementsAre(2, -2, std::numeric_limits<int32_t>::max(),
                          std::numeric_limits<int32_t>::min(), 0, 0));
  EXPECT_THAT(astype(x, DType::u32).to_ints(),
              ElementsAre(2, 0, std::numeric_limits<uint32_t>::max(), 0, 0, 0));
  EXPECT_THAT(astype(f64({4}, {0, -0.0, 0.5, kNaN}), DType::bool_).to_ints(),
              ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(astype(i32({2}, {-1, 7}), DType::u32).to_ints(), ElementsAre(4294967295LL, 7));
  Array flags = greater(f32({2}, {1, 0}), Array::scalar(0.5));
  EXPECT_THAT(astype(flags, DType::f32).to_floats(), ElementsAre(1, 0));
  // bf16 conversion rounds to nearest even: 1 + 2^-8 is a tie -> 1; 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_THAT(astype(f32({2}, {1.00390625f, 1.01171875f}), DType::bf16).to_floats(),
              ElementsAre(1.0f, 1.015625f));
  EXPECT_EQ(astype(x, DType::f32).dtype(), DType::f32);
}

TEST(ConstantsConvert, GradientConvertsBackAndIntegerTargetsStopIt) {
  // (No finite differences here: a step of 1e-6 is below f32's resolution.)
  Tree g = grad(as_tree_function([](const std::vector<Array>& in) {
    return sum(astype(in[0], DType::f32) * 3.0);
  }))({f64({2}, {1, 2})});
  EXPECT_EQ(g.leaf().dtype(), DType::f64);
  EXPECT_THAT(g.leaf().to_doubles(), ElementsAre(3, 3));
  Tree through_int = grad(as_tree_function([](const std::vector<Array>& in) {
    return sum(astype(astype(in[0], DType::i32), DType::f64) + in[0]);
  }))({f64({2}, {1.5, 2.5})});
  EXPECT_THAT(through_int.leaf().to_doubles(), ElementsAre(1, 1));
}

TEST(ConstantsIota, CountsAlongOneDimension) {
  EXPECT_THAT(iota(DType::i32, {2, 3}, 1).to_ints(), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(iota(DType::i32, {2, 3}, 0).to_ints(), ElementsAre(0, 0, 0, 1, 1, 1));
  EXPECT_THAT(iota(DType::f32, {4}, -1).to_floats(), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(iota(DType::u32, {2}, 0).dtype(), DType::u32);
  expect_error_mentions([] { (void)iota(DType::i32, {2}, 1); }, {"iota", "axis 1"});
}

TEST(ConstantsStopGradient, BlocksTheCotangent) {
  // d/dx sum(x * stop_gradient(x)) = stop_gradient(x) = x, not 2x.
  Tree g = grad(as_tree_function([](const std::vector<Array>& in) {
    return sum(in[0] * stop_gradient(in[0]));
  }))({f64({2}, {3, -1})});
  EXPECT_THAT(g.leaf().to_doubles(), ElementsAre(3, -1));
  EXPECT_THAT(stop_gradient(f32({2}, {1, 2})).to_floats(), ElementsAre(1, 2));
}

TEST(ConstantsShape, ReshapeInfersOneDimension) {
  Array x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(reshape(x, {3, -1}).shape(), (Shape{3, 2}));
  EXPECT_EQ(reshape(x, {-1}).shape(), (Shape{6}));
  EXPECT_THAT(reshape(x, {3, 2}).to_floats(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(reshape(Array::scalar(1), {1, 1}).shape(), (Shape{1, 1}));
  expect_error_mentions(
      [&] {
        (void)reshape(x, {4, 2});
      },
      {"reshape: cannot reshape f32[2,3]", "[4,2]"});
  expect_error_mentions([&] { (void)reshape(x, {-1, -1}); }, {"reshape", "only one -1"});
  expect_error_mentions([&] { (void)reshape(x, {4, -1}); }, {"reshape", "f32[2,3]", "[4,-1]"});
}

TEST(ConstantsShape, BroadcastToAndExpandDims) {
  Array x = f32({3}, {1, 2, 3});
  EXPECT_THAT(broadcast_to(x, {2, 3}).to_floats(), ElementsAre(1, 2, 3, 1, 2, 3));
  EXPECT_THAT(broadcast_to(f32({2, 1}, {1, 2}), {2, 2}).to_floats(), ElementsAre(1, 1, 2, 2));
  EXPECT_EQ(expand_dims(x, 0).shape(), (Shape{1, 3}));
  EXPECT_EQ(expand_dims(x, -1).shape(), (Shape{3, 1}));
  EXPECT_EQ(expand_dims(x, 1).shape(), (Shape{3, 1}));
  expect_error_mentions(
      [&] {
        (void)broadcast_to(x, {2, 4});
      },
      {"broadcast_to", "f32[3]", "[2,4]"});
  expect_error_mentions([&] { (void)expand_dims(x, 3); }, {"expand_dims", "axis 3"});
}

TEST(ConstantsShape, BroadcastInDimPlacesDimensions) {
  Array column = f32({2}, {1, 2});
  // Operand dim 0 -> output dim 0: each row repeats its value.
  EXPECT_THAT(broadcast_in_dim(column, {2, 3}, {0}).to_floats(), ElementsAre(1, 1, 1, 2, 2, 2));
  EXPECT_THAT(broadcast_in_dim(f32({1, 2}, {1, 2}), {3, 2}, {0, 1}).to_floats(),
              ElementsAre(1, 2, 1, 2, 1, 2));
  EXPECT_THAT(broadcast_in_dim(Array::scalar(4), {2}, {}).to_floats(), ElementsAre(4, 4));
  expect_error_mentions(
      [&] {
        (void)broadcast_in_dim(column, {3, 3}, {0});
      },
      {"broadcast_in_dim", "f32[2]", "[3,3]", "neither 1 nor"});
  expect_error_mentions(
      [&] {
        (void)broadcast_in_dim(column, {2, 3}, {});
      },
      {"broadcast_in_dim", "one broadcast dimension per operand dimension"});
  expect_error_mentions(
      [&] {
        (void)broadcast_in_dim(f32({2, 2}, {1, 2, 3, 4}), {2, 2, 2}, {1, 0});
      },
      {"broadcast_in_dim", "strictly increasing"});
}

TEST(ConstantsShape, ShapeOpGradientsMatchFiniteDifferences) {
  Array x = f64({2, 1}, {0.5, -1.5});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) {
        Array b = broadcast_in_dim(in[0], {3, 2, 4}, {1, 2});
        return weighted_sum(b * reshape(iota(DType::f64, {24}, 0), {3, 2, 4}));
      },
      {x});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) {
        return weighted_sum(reshape(expand_dims(in[0], 0), {-1}) * 2.0);
      },
      {x});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& in) { return weighted_sum(broadcast_to(in[0], {3, 2, 2})); },
      {x});
}

}  // namespace
}  // namespace pmap_engine
