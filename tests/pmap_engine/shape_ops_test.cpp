// Shape ops: transpose, concatenate, slice (and pad, its transpose), take_along_axis (and
// scatter_add, its transpose). Known answers from NumPy 1.24 (/usr/bin/python3), snippets in
// comments; out-of-range take_along_axis follows jnp's default mode "fill"
// (jax/_src/numpy/indexing.py), which NumPy does not have.
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
using pmap_engine::testing::irregular;
using pmap_engine::testing::jitted;
using pmap_engine::testing::program_of;
using pmap_engine::testing::weighted_total;
using ::testing::HasSubstr;

// Op by op and under jit: the same values, bit for bit (no arithmetic here to reorder).
void expect_same_both_ways(const ArrayFunction& fn, const std::vector<Array>& inputs) {
  Array eager = fn(inputs);
  Array traced = jitted(fn, inputs);
  EXPECT_EQ(traced.shape(), eager.shape());
  EXPECT_EQ(traced.dtype(), eager.dtype());
  std::vector<double> eager_values = eager.to_doubles();
  std::vector<double> traced_values = traced.to_doubles();
  ASSERT_EQ(eager_values.size(), traced_values.size());
  for (size_t i = 0; i < eager_values.size(); ++i) {
    if (std::isnan(eager_values[i])) {
      EXPECT_TRUE(std::isnan(traced_values[i])) << i;
    } else {
      EXPECT_EQ(traced_values[i], eager_values[i]) << i;
    }
  }
}

// np.arange(n).reshape(shape) in `dtype`.
Array arange(const Shape& shape, DType dtype = DType::f32) {
  std::vector<double> values(shape_num_elements(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  return astype(Array::from_doubles(shape, values), dtype);
}

// --- transpose ---

TEST(ShapeOpsTranspose, KnownAnswers) {
  // np.arange(6).reshape(2, 3).T
  Array t = transpose(arange({2, 3}));
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_floats(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1)
  Array x = arange({2, 3, 4});
  Array t201 = transpose(x, {2, 0, 1});
  EXPECT_EQ(t201.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(t201.to_floats(), (std::vector<float>{0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,
                                                  2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));
  // .transpose(1, 0, 2), with a negative axis for the last one.
  EXPECT_EQ(transpose(x, {1, 0, -1}).to_floats(),
            (std::vector<float>{0,  1,  2,  3,  12, 13, 14, 15, 4,  5,  6,  7,
                                16, 17, 18, 19, 8,  9,  10, 11, 20, 21, 22, 23}));
  // Integer and 16-bit dtypes move the same way.
  EXPECT_EQ(transpose(arange({2, 3}, DType::i32)).to_ints(),
            (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(transpose(arange({2, 3}, DType::bf16)).to_floats(),
            (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(transpose(arange({2, 3}, DType::f64)).to_floats(),
            (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ShapeOpsTranspose, IdentityPermutationIsNotAnOp) {
  EXPECT_THAT(program_of(
                  [](const std::vector<Array>& a) {
                    return transpose(a[0], {0, 1}) * 2.0;
                  },
                  {arange({2, 3})}),
              ::testing::Not(HasSubstr("transpose")));
  EXPECT_THAT(
      program_of([](const std::vector<Array>& a) { return transpose(a[0]); }, {arange({2, 3})}),
      HasSubstr("transpose[permutation=(1, 0)]"));
}

TEST(ShapeOpsTranspose, BadPermutationNamesOpAndShape) {
  std::string message = error_of([] { transpose(arange({2, 3}), {0, 0}); });
  EXPECT_THAT(message, HasSubstr("transpose: permutation (0, 0) isn't a permutation"));
  EXPECT_THAT(message, HasSubstr("f32[2,3]"));
  EXPECT_THAT(error_of([] { transpose(arange({2, 3}), {0, 1, 2}); }), HasSubstr("(0, 1, 2)"));
}

TEST(ShapeOpsTranspose, GradientAndJit) {
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(transpose(a[0], {2, 0, 1}));
      },
      {irregular({2, 3, 4})});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return weighted_total(transpose(a[0]) * a[1]); },
      {irregular({3, 2}), irregular({3}, 1.3)});
  expect_same_both_ways(
      [](const std::vector<Array>& a) {
        return transpose(a[0], {1, 2, 0});
      },
      {arange({2, 3, 4})});
}

// --- concatenate ---

TEST(ShapeOpsConcatenate, KnownAnswers) {
  // np.concatenate([np.arange(6).reshape(2, 3), np.arange(10, 18).reshape(2, 4)], 1)
  Array a = arange({2, 3});
  Array b = arange({2, 4}) + 10.0;
  Array joined = concatenate({a, b}, 1);
  EXPECT_EQ(joined.shape(), (Shape{2, 7}));
  EXPECT_EQ(joined.to_floats(),
            (std::vector<float>{0, 1, 2, 10, 11, 12, 13, 3, 4, 5, 14, 15, 16, 17}));
  EXPECT_EQ(concatenate({a, b}, -1).to_floats(), joined.to_floats());
  // Along axis 0, with three operands, one of them empty.
  Array stacked = concatenate({arange({1, 2}), zeros({0, 2}), arange({2, 2}) + 5.0}, 0);
  EXPECT_EQ(stacked.shape(), (Shape{3, 2}));
  EXPECT_EQ(stacked.to_floats(), (std::vector<float>{0, 1, 5, 6, 7, 8}));
  // jnp promotes: i32 with f32 gives f32.
  Array mixed = concatenate({Array::from_ints({2}, {1, 2}), Array::from_floats({1}, {0.5f})}, 0);
  EXPECT_EQ(mixed.dtype(), DType::f32);
  EXPECT_EQ(mixed.to_floats(), (std::vector<float>{1, 2, 0.5f}));
}

TEST(ShapeOpsConcatenate, ErrorsNameTheShapes) {
  std::string message = error_of([] { concatenate({arange({2, 3}), arange({3, 3})}, 1); });
  EXPECT_THAT(message, HasSubstr("concatenate: cannot concatenate arrays with shapes that differ"));
  EXPECT_THAT(message, HasSubstr("along dimension 1"));
  EXPECT_THAT(message, HasSubstr("f32[2,3], f32[3,3]"));
  EXPECT_THAT(error_of([] {
                concatenate({arange({2, 3}), arange({3})}, 0);
              }),
              HasSubstr("different numbers of dimensions: got f32[2,3], f32[3]"));
  EXPECT_THAT(error_of([] {
                concatenate({arange({2}), arange({2})}, 1);
              }),
              HasSubstr("concatenate: axis 1 is out of bounds"));
  EXPECT_THAT(error_of([] {
                concatenate({Array::scalar(1), Array::scalar(2)}, 0);
              }),
              HasSubstr("zero-dimensional arrays cannot be concatenated"));
  EXPECT_THAT(error_of([] { concatenate({}, 0); }), HasSubstr("concatenate: needs at least one"));
}

TEST(ShapeOpsConcatenate, GradientAndJit) {
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(concatenate({a[0], a[1], a[2]}, 1));
      },
      {irregular({2, 1}), irregular({2, 3}, 0.7), irregular({2, 2}, 1.9)});
  expect_same_both_ways(
      [](const std::vector<Array>& a) {
        return concatenate({a[0], a[1]}, 0);
      },
      {arange({2, 3}), arange({1, 3})});
  EXPECT_THAT(program_of(
                  [](const std::vector<Array>& a) {
                    return concatenate({a[0], a[1]}, -1);
                  },
                  {arange({2, 3}), arange({2, 1})}),
              HasSubstr("concatenate[dimension=1]"));
}

// --- slice and pad ---

TEST(ShapeOpsSlice, KnownAnswers) {
  // np.arange(24).reshape(2, 3, 4)[1:2, 0:3, 1:3]
  Array s = slice(arange({2, 3, 4}), {1, 0, 1}, {2, 3, 3});
  EXPECT_EQ(s.shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(s.to_floats(), (std::vector<float>{13, 14, 17, 18, 21, 22}));
  EXPECT_EQ(slice(arange({5}), {2}, {2}).shape(), (Shape{0}));
  EXPECT_EQ(slice(arange({5}, DType::u32), {3}, {5}).to_ints(), (std::vector<int64_t>{3, 4}));
}

TEST(ShapeOpsSlice, ErrorsNameTheIndicesAndOperand) {
  std::string message = error_of([] { slice(arange({2, 3}), {0, 1}, {2, 4}); });
  EXPECT_THAT(message, HasSubstr("slice: limit_indices must be less than or equal to operand "
                                 "shape, got limit_indices (2, 4)"));
  EXPECT_THAT(message, HasSubstr("f32[2,3]"));
  EXPECT_THAT(error_of([] {
                slice(arange({2, 3}), {-1, 0}, {1, 1});
              }),
              HasSubstr("greater than or equal to zero, got start_indices of (-1, 0)"));
  EXPECT_THAT(error_of([] {
                slice(arange({2, 3}), {1, 2}, {1, 1});
              }),
              HasSubstr("got start_indices (1, 2) and limit_indices (1, 1)"));
  EXPECT_THAT(error_of([] {
                slice(arange({2, 3}), {0}, {1});
              }),
              HasSubstr("one entry per dimension"));
}

// slice's VJP pads the cotangent with zeros back to the operand's shape.
TEST(ShapeOpsSlice, GradientIsTheZeroPaddedCotangent) {
  Tree grads = grad([](const std::vector<Tree>& args) {
    return Tree(
        sum(slice(args[0].leaf(), {0, 1}, {2, 3}) * Array::from_floats({2, 2}, {1, 2, 3, 4})));
  })({Tree(arange({2, 4}))});
  EXPECT_EQ(grads.leaf().to_floats(), (std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}));
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(slice(a[0], {1, 0, 2}, {2, 3, 4}));
      },
      {irregular({2, 3, 4})});
  std::string program = program_of(
      [](const std::vector<Array>& a) {
        return grad([](const std::vector<Tree>& args) {
                 return Tree(sum(slice(args[0].leaf(), {1}, {3})));
               })({Tree(a[0])})
            .leaf();
      },
      {arange({4})});
  EXPECT_THAT(program, HasSubstr("slice[start_indices=(1,) limit_indices=(3,)]"));
  EXPECT_THAT(program, HasSubstr("pad[padding_low=(1,) padding_high=(1,)]"));
  expect_same_both_ways(
      [](const std::vector<Array>& a) {
        return slice(a[0], {0, 1}, {1, 3});
      },
      {arange({2, 3})});
}

// --- take_along_axis ---

TEST(ShapeOpsTakeAlongAxis, KnownAnswers) {
  // jnp.take_along_axis docstring / np.take_along_axis(x, [[0, 2], [1, 0]], 1) -> [[1,3],[5,4]]
  Array x = Array::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Array taken = take_along_axis(x, Array::from_ints({2, 2}, {0, 2, 1, 0}), 1);
  EXPECT_EQ(taken.shape(), (Shape{2, 2}));
  EXPECT_EQ(taken.to_floats(), (std::vector<float>{1, 3, 5, 4}));
  // Negative indices wrap once: [[-1], [-3]] along axis -1 -> [[3], [4]].
  EXPECT_EQ(take_along_axis(x, Array::from_ints({2, 1}, {-1, -3}), -1).to_floats(),
            (std::vector<float>{3, 4}));
  // u32 indices, i32 data.
  EXPECT_EQ(take_along_axis(arange({2, 3}, DType::i32), Array::from_uints({1, 3}, {1, 0, 1}), 0)
                .to_ints(),
            (std::vector<int64_t>{3, 1, 5}));
}

// Indices broadcast against x off the axis: np.take_along_axis(np.arange(24.).reshape(2,3,4),
// [[[3, 0]], [[1, 1]]], 2) -> [3,0,7,4,11,8,13,13,17,17,21,21], shape (2, 3, 2).
TEST(ShapeOpsTakeAlongAxis, IndicesBroadcastOffTheAxis) {
  Array taken = take_along_axis(arange({2, 3, 4}), Array::from_ints({2, 1, 2}, {3, 0, 1, 1}), 2);
  EXPECT_EQ(taken.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(taken.to_floats(), (std::vector<float>{3, 0, 7, 4, 11, 8, 13, 13, 17, 17, 21, 21}));
  EXPECT_THAT(error_of([] {
                take_along_axis(arange({2, 3}), Array::from_ints({3, 1}, {0, 0, 0}), 1);
              }),
              HasSubstr("incompatible shapes for broadcasting"));
}

// jnp's default mode "fill": an index out of [-N, N) reads NaN for floats, INT32_MIN for i32,
// UINT32_MAX for u32 (docstring: take_along_axis(x, [[1, 0, 2]], axis=0) -> [4, 2, nan]).
TEST(ShapeOpsTakeAlongAxis, OutOfRangeIndicesReadTheFillValue) {
  Array x = Array::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<float> taken = take_along_axis(x, Array::from_ints({1, 3}, {1, 0, 2}), 0).to_floats();
  EXPECT_EQ(taken[0], 4.0f);
  EXPECT_EQ(taken[1], 2.0f);
  EXPECT_TRUE(std::isnan(taken[2]));
  // -3 wraps once to -1, still out of range; the [1, 1] indices broadcast to [1, 3].
  for (float value : take_along_axis(x, Array::from_ints({1, 1}, {-3}), 0).to_floats()) {
    EXPECT_TRUE(std::isnan(value));
  }
  for (float value :
       take_along_axis(astype(x, DType::bf16), Array::from_ints({1, 1}, {7}), 1).to_floats()) {
    EXPECT_TRUE(std::isnan(value));  // [2, 1]: both rows read the bf16 NaN
  }
  EXPECT_EQ(take_along_axis(arange({3}, DType::i32), Array::from_ints({1}, {3}), 0).item(),
            static_cast<double>(std::numeric_limits<int32_t>::min()));
  EXPECT_EQ(take_along_axis(arange({3}, DType::u32), Array::from_uints({1}, {9}), 0).item(),
            static_cast<double>(std::numeric_limits<uint32_t>::max()));
  // Along an empty axis jnp returns zeros of the output shape.
  EXPECT_EQ(take_along_axis(zeros({2, 0}), Array::from_ints({2, 1}, {0, 0}), 1).to_floats(),
            (std::vector<float>{0, 0}));
}

TEST(ShapeOpsTakeAlongAxis, ErrorsNameOpTypesAndAxis) {
  Array x = arange({2, 3});
  std::string message = error_of([&] {
    take_along_axis(x, Array::from_floats({2, 1}, {0, 1}), 1);
  });
  EXPECT_THAT(message, HasSubstr("take_along_axis: indices must be of integer type"));
  EXPECT_THAT(message, HasSubstr("f32[2,3] and indices f32[2,1]"));
  EXPECT_THAT(error_of([&] {
                take_along_axis(x, Array::from_ints({2}, {0, 1}), 0);
              }),
              HasSubstr("same number of dimensions; 1 vs. 2"));
  EXPECT_THAT(error_of([&] {
                take_along_axis(x, Array::from_ints({2, 1}, {0, 1}), 2);
              }),
              HasSubstr("take_along_axis: axis 2 is out of bounds for array of dimension 2"));
}

// The gradient scatters the cotangent back: repeated indices accumulate, out-of-range ones
// (filled with NaN on the way forward) receive nothing.
TEST(ShapeOpsTakeAlongAxis, GradientScatterAddsTheCotangent) {
  Array indices = Array::from_ints({2, 3}, {0, 0, 2, 1, 5, -1});
  TreeFunction f = [indices](const std::vector<Tree>& args) {
    Array taken = take_along_axis(args[0].leaf(), indices, 1);  // [2, 3]
    Array in_range = slice(taken, {0, 0}, {2, 1}) + slice(taken, {0, 2}, {2, 3});
    return Tree(sum(in_range * Array::from_floats({2, 1}, {1, 10})) +
                sum(slice(taken, {0, 1}, {1, 2})) * 2.0);
  };
  Array x = Array::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  // Row 0: indices 0 (weight 1), 0 (weight 2), 2 (weight 1) -> [3, 0, 1].
  // Row 1: index 1 (weight 10), 5 dropped (and not in the loss), -1 -> 2 (weight 10).
  std::vector<float> expected{3, 0, 1, 0, 10, 10};
  EXPECT_EQ(grad(f)({Tree(x)}).leaf().to_floats(), expected);
  EXPECT_EQ(jit(grad(f))({Tree(x)}).leaf().to_floats(), expected);

  Array in_range_indices = Array::from_ints({3, 2}, {1, 1, 0, 3, 2, -4});
  expect_gradients_match_finite_differences(
      [in_range_indices](const std::vector<Array>& a) {
        return weighted_total(take_along_axis(a[0], in_range_indices, 1));
      },
      {irregular({3, 4})});
  // Broadcast indices: the gradient also sums over the broadcast.
  Array column = Array::from_ints({1, 2}, {2, 0});
  expect_gradients_match_finite_differences(
      [column](const std::vector<Array>& a) {
        return weighted_total(take_along_axis(a[0], column, 1));
      },
      {irregular({3, 4})});
}

// Second order reaches scatter_add's own VJP: h(x) = sum(take(x)^2) / 2 has the gradient
// scatter_add(0, indices, take(x)), which depends on x through its updates.
TEST(ShapeOpsTakeAlongAxis, SecondOrderGoesThroughScatterAdd) {
  Array indices = Array::from_ints({2, 3}, {0, 0, 2, 1, 3, -1});
  auto inner_gradient = [indices](const Array& x) {
    return grad([indices](const std::vector<Tree>& args) {
             Array taken = take_along_axis(args[0].leaf(), indices, 1);
             return Tree(sum(taken * taken) * 0.5);
           })({Tree(x)})
        .leaf();
  };
  expect_gradients_match_finite_differences(
      [inner_gradient](const std::vector<Array>& a) {
        return weighted_total(inner_gradient(a[0]));
      },
      {irregular({2, 4})});
}

TEST(ShapeOpsTakeAlongAxis, JitMatchesOpByOp) {
  expect_same_both_ways([](const std::vector<Array>& a) { return take_along_axis(a[0], a[1], 0); },
                        {arange({3, 2}), Array::from_ints({2, 2}, {2, 0, -1, 7})});
  EXPECT_THAT(program_of([](const std::vector<Array>& a) { return take_along_axis(a[0], a[1], 1); },
                         {arange({3, 2}), Array::from_ints({3, 1}, {0, 1, 0})}),
              HasSubstr("take_along_axis[axis=1]"));
}

}  // namespace
}  // namespace pmap_engine
