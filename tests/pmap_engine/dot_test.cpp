// dot_general and matmul: layouts (lax's dimension numbers, jnp.matmul's batching), every dtype's
// accumulation, the OpenBLAS path against a naive f64 loop, VJPs, errors, jit.
// Known answers from NumPy 1.24 (/usr/bin/python3), snippets in comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
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

// np.arange(n).reshape(shape) * scale + offset, in f32 (exact for these small integers).
Array arange(const Shape& shape, double scale = 1.0, double offset = 0.0) {
  std::vector<float> values(shape_num_elements(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(static_cast<double>(i) * scale + offset);
  }
  return Array::from_floats(shape, values);
}

// --- matmul layouts ---

TEST(DotMatmul, KnownAnswersFor1DAnd2D) {
  // a = np.arange(6.).reshape(2, 3); b = np.arange(6.).reshape(3, 2) - 2; v = [1, -1, 2]
  Array a = arange({2, 3});
  Array b = arange({3, 2}, 1.0, -2.0);
  Array v = Array::from_floats({3}, {1, -1, 2});
  Array ab = matmul(a, b);  // a @ b -> [[4, 7], [4, 16]]
  EXPECT_EQ(ab.shape(), (Shape{2, 2}));
  EXPECT_EQ(ab.to_floats(), (std::vector<float>{4, 7, 4, 16}));
  Array vb = matmul(v, b);  // v @ b -> [2, 4]
  EXPECT_EQ(vb.shape(), (Shape{2}));
  EXPECT_EQ(vb.to_floats(), (std::vector<float>{2, 4}));
  Array av = matmul(a, v);  // a @ v -> [3, 9]
  EXPECT_EQ(av.shape(), (Shape{2}));
  EXPECT_EQ(av.to_floats(), (std::vector<float>{3, 9}));
  Array vv = matmul(v, v);  // v @ v -> 6, a 0-d array
  EXPECT_EQ(vv.shape(), Shape{});
  EXPECT_EQ(vv.item(), 6.0);
}

TEST(DotMatmul, BatchedAndBroadcastBatches) {
  // A = np.arange(24.).reshape(2, 3, 4); B = np.arange(40.).reshape(2, 4, 5) * 0.5; A @ B
  Array a = arange({2, 3, 4});
  Array b = arange({2, 4, 5}, 0.5);
  Array ab = matmul(a, b);
  EXPECT_EQ(ab.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(ab.to_floats(),
            (std::vector<float>{35,  38,   41,   44,   47,   95,   106,  117,  128,  139,
                                155, 174,  193,  212,  231,  755,  782,  809,  836,  863,
                                975, 1010, 1045, 1080, 1115, 1195, 1238, 1281, 1324, 1367}));
  // Broadcast batches: each result slice equals the 2-D product of the matching slices.
  auto matrix = [](const Array& x, int64_t i) {
    Shape start(x.shape().size(), 0), limit = x.shape();
    start[0] = i;
    limit[0] = i + 1;
    return reshape(slice(x, start, limit), Shape(x.shape().begin() + 1, x.shape().end()));
  };
  Array a0 = matrix(a, 0);                        // [3, 4]
  Array shared = matmul(a0, b);                   // [3, 4] @ [2, 4, 5] -> [2, 3, 5]
  Array one = matmul(reshape(a0, {1, 3, 4}), b);  // size-1 batch broadcasts
  Array rows = matmul(a, matrix(b, 1));           // [2, 3, 4] @ [4, 5] -> [2, 3, 5]
  ASSERT_EQ(shared.shape(), (Shape{2, 3, 5}));
  ASSERT_EQ(one.shape(), (Shape{2, 3, 5}));
  ASSERT_EQ(rows.shape(), (Shape{2, 3, 5}));
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(matrix(shared, i).to_floats(), matmul(a0, matrix(b, i)).to_floats()) << i;
    EXPECT_EQ(matrix(one, i).to_floats(), matmul(a0, matrix(b, i)).to_floats()) << i;
    EXPECT_EQ(matrix(rows, i).to_floats(), matmul(matrix(a, i), matrix(b, 1)).to_floats()) << i;
  }
  // Both batch sizes 1: squeezed for the dot, restored afterwards.
  EXPECT_EQ(matmul(reshape(a0, {1, 3, 4}), reshape(matrix(b, 0), {1, 4, 5})).shape(),
            (Shape{1, 3, 5}));
  // A vector against a batch of matrices: [4] @ [2, 4, 5] -> [2, 5].
  EXPECT_EQ(matmul(Array::from_floats({4}, {1, 0, 0, 0}), b).to_floats(),
            (std::vector<float>{0, 0.5, 1, 1.5, 2, 10, 10.5, 11, 11.5, 12}));
}

TEST(DotMatmul, EmptyContractionGivesZeros) {
  Array out = matmul(zeros({2, 0}), zeros({0, 3}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.to_floats(), (std::vector<float>(6, 0.0f)));
  EXPECT_EQ(matmul(zeros({0, 4}), zeros({4, 3})).shape(), (Shape{0, 3}));
}

TEST(DotMatmul, MismatchedInnerDimensionsUseJnpsText) {
  std::string message = error_of([] { matmul(arange({2, 3}), arange({4, 5})); });
  EXPECT_THAT(message, HasSubstr("matmul: dot_general requires contracting dimensions to have "
                                 "the same shape, got (3,) and (4,)"));
  EXPECT_THAT(message, HasSubstr("f32[2,3] and f32[4,5]"));
  EXPECT_THAT(error_of([] {
                matmul(arange({2, 3, 4}), arange({3, 4, 5}));
              }),
              HasSubstr("Incompatible types for matmul arguments: f32[2,3,4] and f32[3,4,5]"));
  EXPECT_THAT(error_of([] { matmul(Array::scalar(2), arange({2})); }),
              HasSubstr("matmul: input operand 0 must have ndim at least 1"));
}

// --- dot_general layouts ---

// Contracting two dimensions listed in different orders on each side:
// L = np.arange(24.).reshape(2, 3, 4); R = np.arange(16.).reshape(4, 2, 2) - 7
// np.einsum('amb,bna->mn', L, R) -> [[34, 154], [18, 202], [2, 250]]
TEST(DotGeneral, ContractsPairedDimensionsInListedOrder) {
  Array lhs = arange({2, 3, 4});
  Array rhs = arange({4, 2, 2}, 1.0, -7.0);
  Array out = dot_general(lhs, rhs, {0, 2}, {2, 0});
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(out.to_floats(), (std::vector<float>{34, 154, 18, 202, 2, 250}));
}

// Batch dimensions anywhere; the output puts them first:
// L2 = np.arange(24.).reshape(2, 3, 4) - 5; R2 = np.arange(24.).reshape(4, 3, 2) * 0.25
// np.einsum('mbk,kbn->bmn', L2, R2)
TEST(DotGeneral, BatchDimensionsComeFirstInTheOutput) {
  Array lhs = arange({2, 3, 4}, 1.0, -5.0);
  Array rhs = arange({4, 3, 2}, 0.25);
  Array out = dot_general(lhs, rhs, {2}, {0}, {1}, {1});
  EXPECT_EQ(out.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(out.to_floats(),
            (std::vector<float>{-24, -27.5, 84, 92.5, 13, 13.5, 145, 157.5, 66, 70.5, 222, 238.5}));
  // No contraction at all: an outer product per batch.
  EXPECT_EQ(
      dot_general(Array::from_floats({2}, {1, 2}), Array::from_floats({3}, {1, 10, 100}), {}, {})
          .to_floats(),
      (std::vector<float>{1, 10, 100, 2, 20, 200}));
}

TEST(DotGeneral, ErrorsNameTheOperandsAndDimensions) {
  Array a = arange({2, 3});
  std::string message = error_of([&] { dot_general(a, arange({4, 2}), {1}, {0}); });
  EXPECT_THAT(message, HasSubstr("dot_general: requires contracting dimensions to have the same "
                                 "shape, got (3,) and (4,)"));
  EXPECT_THAT(message, HasSubstr("f32[2,3] and f32[4,2]"));
  EXPECT_THAT(error_of([&] {
                dot_general(a, arange({3, 3}), {1}, {0}, {0}, {1});
              }),
              HasSubstr("batch dimensions to have the same shape, got (2,) and (3,)"));
  EXPECT_THAT(
      error_of([&] { dot_general(a, a, {2}, {1}); }),
      HasSubstr("lhs dimension numbers to be nonnegative and less than the number of axes"));
  EXPECT_THAT(error_of([&] { dot_general(a, a, {1}, {1}, {0}, {}); }),
              HasSubstr("equal numbers of lhs_batch and rhs_batch"));
  EXPECT_THAT(error_of([&] { dot_general(a, a, {1}, {1}, {1}, {1}); }),
              HasSubstr("distinct and disjoint"));
  EXPECT_THAT(error_of([&] { dot_general(a, astype(a, DType::f64), {1}, {1}); }),
              HasSubstr("same numeric dtype, got f32[2,3] and f64[2,3]"));
}

// --- dtypes ---

TEST(DotDtypes, F64AndPromotion) {
  Array a = astype(arange({2, 3}), DType::f64);
  Array out = matmul(a, astype(arange({3, 2}, 1.0, -2.0), DType::f64));
  EXPECT_EQ(out.dtype(), DType::f64);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{4, 7, 4, 16}));
  // jnp.matmul promotes: f32 @ f64 -> f64; bf16 @ f32 -> f32.
  EXPECT_EQ(matmul(arange({2, 3}), astype(arange({3, 2}), DType::f64)).dtype(), DType::f64);
  EXPECT_EQ(matmul(astype(arange({2, 3}), DType::bf16), arange({3, 2})).dtype(), DType::f32);
}

// bf16/f16 dots accumulate in f32 and round once. [1, u/2, u/2] . [1, 1, 1] with u the
// format's ulp at 1 (2^-7 for bf16, 2^-10 for f16): in f32 the sum is 1 + u, representable;
// accumulating in the 16-bit format would round 1 + u/2 back to 1 (a tie, to even) twice.
TEST(DotDtypes, HalfFloatsAccumulateInF32) {
  for (auto [dtype, ulp] : {std::pair{DType::bf16, 0x1p-7f}, std::pair{DType::f16, 0x1p-10f}}) {
    Array a = astype(Array::from_floats({1, 3}, {1, ulp / 2, ulp / 2}), dtype);
    Array b = astype(Array::from_floats({3, 1}, {1, 1, 1}), dtype);
    Array out = matmul(a, b);
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_EQ(out.item(), 1.0 + static_cast<double>(ulp)) << dtype_name(dtype);
  }
}

TEST(DotDtypes, IntegersWrapModulo2To32) {
  // 65536 * 65536 = 2^32 wraps to 0; + 3 * -1.
  Array a = Array::from_ints({1, 2}, {65536, 3});
  Array b = Array::from_ints({2, 1}, {65536, -1});
  Array out = matmul(a, b);
  EXPECT_EQ(out.dtype(), DType::i32);
  EXPECT_EQ(out.item(), -3.0);
  Array u = matmul(Array::from_uints({2}, {4000000000u, 1}), Array::from_uints({2}, {1, 7}));
  EXPECT_EQ(u.dtype(), DType::u32);
  EXPECT_EQ(u.item(), 4000000007.0);
}

// --- the OpenBLAS path against a naive f64 loop ---

// The MNIST MLP's first layer, [64, 784] @ [784, 256] in f32, against the same product
// computed in f64 from the same f32 inputs. The bound is relative to sum_k |a_ik||b_kj|, the
// scale of the rounding error of any summation order (about sqrt(784) * 2^-24 ~ 2e-6 typical,
// 784 * 2^-24 ~ 5e-5 worst case): 1e-5 catches any layout or indexing error, which would be
// O(1). The norm-wise relative error is checked at 1e-5 as well.
TEST(DotBlas, F32MatmulMatchesNaiveF64Loop) {
  constexpr size_t kM = 64, kK = 784, kN = 256;
  std::vector<float> a(kM * kK), b(kK * kN);
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(state >> 8) % 2001 - 1000) / 997.0f;
  };
  for (float& value : a) value = next();
  for (float& value : b) value = next();
  std::vector<float> c =
      matmul(Array::from_floats({kM, kK}, a), Array::from_floats({kK, kN}, b)).to_floats();
  ASSERT_EQ(c.size(), kM * kN);
  double error_norm = 0.0, reference_norm = 0.0, worst_relative = 0.0;
  for (size_t i = 0; i < kM; ++i) {
    for (size_t j = 0; j < kN; ++j) {
      double reference = 0.0, magnitude = 0.0;
      for (size_t k = 0; k < kK; ++k) {
        reference += static_cast<double>(a[i * kK + k]) * static_cast<double>(b[k * kN + j]);
        magnitude +=
            std::abs(static_cast<double>(a[i * kK + k]) * static_cast<double>(b[k * kN + j]));
      }
      const double error = std::abs(static_cast<double>(c[i * kN + j]) - reference);
      worst_relative = std::max(worst_relative, error / magnitude);
      error_norm += error * error;
      reference_norm += reference * reference;
      ASSERT_LE(error, 1e-5 * magnitude) << "element [" << i << ", " << j << "] = " << c[i * kN + j]
                                         << ", f64 reference " << reference;
    }
  }
  EXPECT_LE(std::sqrt(error_norm / reference_norm), 1e-5);
  RecordProperty("worst_relative_error", std::to_string(worst_relative));
}

// --- VJPs ---

TEST(DotGradients, MatmulMatchesFiniteDifferences) {
  ArrayFunction product = [](const std::vector<Array>& a) {
    return weighted_total(matmul(a[0], a[1]));
  };
  expect_gradients_match_finite_differences(product, {irregular({3, 4}), irregular({4, 2}, 1.1)});
  expect_gradients_match_finite_differences(product, {irregular({4}), irregular({4, 2}, 1.1)});
  expect_gradients_match_finite_differences(product, {irregular({3, 4}), irregular({4}, 1.1)});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return matmul(a[0], a[1]); },
      {irregular({5}), irregular({5}, 0.9)});
  expect_gradients_match_finite_differences(product,
                                            {irregular({2, 3, 4}), irregular({2, 4, 2}, 1.1)});
  // Broadcast batches: the gradient of the shared operand sums over the batch.
  expect_gradients_match_finite_differences(product,
                                            {irregular({3, 4}), irregular({2, 4, 2}, 1.1)});
  expect_gradients_match_finite_differences(product,
                                            {irregular({1, 3, 4}), irregular({2, 4, 2}, 1.1)});
  // A layer: x [B, D] @ w [D, H] + b [H].
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) { return weighted_total(tanh(matmul(a[0], a[1]) + a[2])); },
      {irregular({3, 4}), irregular({4, 2}, 1.1), irregular({2}, 2.3)});
}

TEST(DotGradients, DotGeneralWithPermutedAndBatchDimensions) {
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(dot_general(a[0], a[1], {0, 2}, {2, 0}));
      },
      {irregular({2, 3, 4}), irregular({4, 2, 2}, 0.8)});
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(dot_general(a[0], a[1], {2}, {0}, {1}, {1}));
      },
      {irregular({2, 3, 4}), irregular({4, 3, 2}, 0.8)});
  // Two batch dimensions listed in swapped order on the rhs, and a contraction.
  expect_gradients_match_finite_differences(
      [](const std::vector<Array>& a) {
        return weighted_total(dot_general(a[0], a[1], {3}, {1}, {0, 2}, {3, 0}));
      },
      {irregular({2, 3, 2, 4}), irregular({2, 4, 3, 2}, 0.8)});
}

// Closed form: d/dx sum(x @ w) = 1 @ w^T, d/dw = x^T @ 1.
TEST(DotGradients, ClosedFormForAMatrixProduct) {
  TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(sum(matmul(args[0].leaf(), args[1].leaf())));
  };
  Array x = arange({2, 3});
  Array w = arange({3, 2}, 1.0, -2.0);
  Tree grads = grad(loss, {0, 1})({Tree(x), Tree(w)});
  EXPECT_EQ(grads[0].leaf().to_floats(), (std::vector<float>{-3, 1, 5, -3, 1, 5}));
  EXPECT_EQ(grads[1].leaf().to_floats(), (std::vector<float>{3, 3, 5, 5, 7, 7}));
  Tree jitted_grads = jit(grad(loss, {0, 1}))({Tree(x), Tree(w)});
  EXPECT_EQ(jitted_grads[0].leaf().to_floats(), grads[0].leaf().to_floats());
  EXPECT_EQ(jitted_grads[1].leaf().to_floats(), grads[1].leaf().to_floats());
}

TEST(DotJit, MatchesOpByOpAndPrintsDimensionNumbers) {
  ArrayFunction f = [](const std::vector<Array>& a) { return matmul(a[0], a[1]); };
  Array x = arange({3, 5}, 0.5, -1.0);
  Array w = arange({5, 4}, 0.25, -2.0);
  EXPECT_EQ(jitted(f, {x, w}).to_floats(), f({x, w}).to_floats());
  EXPECT_THAT(program_of(f, {x, w}),
              HasSubstr("dot_general[lhs_contracting=(1,) rhs_contracting=(0,) lhs_batch=() "
                        "rhs_batch=()]"));
}

}  // namespace
}  // namespace pmap_engine
