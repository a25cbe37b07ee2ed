// dot_general's two f32 paths (pmap_engine/src/ops/dot_kernel.h) against each other: oneDNN's
// matmul reading the operands in place through their strides, and the OpenBLAS path (packed
// operands, a gemm per batch element), kept as the reference. Over many dimension numbers:
// batch dimensions leading or not, contracting dimensions on either side, transposed operands,
// size-1 and empty dimensions. ctest runs this suite twice, the second time on oneDNN's AVX2
// kernels (DNNL_MAX_CPU_ISA=AVX2), the ones an AMD machine of this project's runs.
//
// Bound. Both paths sum each output element's K products in f32, in different orders (and
// oneDNN with FMAs). Any such evaluation of a dot product of K terms lies within
// gamma_K * sum_k |a_k b_k| of the exact value, gamma_K = K u / (1 - K u), u = 2^-24 (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1; a fused multiply-add rounds
// once where a product and a sum round twice, so the bound holds for it too): the two results
// differ by at most twice that. sum_k |a_k b_k| is the same dot_general of |lhs| and |rhs| in
// f64, whose own rounding (relative 2^-53 K) is negligible against it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"
#include "ops/dot_kernel.h"

namespace pmap_engine {
namespace {

struct DotCase {
  std::string name;
  Shape lhs;
  Shape rhs;
  DotDimensionNumbers dn;
};

std::ostream& operator<<(std::ostream& out, const DotCase& c) { return out << c.name; }

// |x| as f64.
Buffer magnitudes_f64(const Buffer& x) {
  Buffer out = Buffer::allocate(DType::f64, x.shape);
  for (size_t i = 0; i < x.num_elements(); ++i) {
    out.data<double>()[i] = std::abs(static_cast<double>(x.data<float>()[i]));
  }
  return out;
}

int64_t contracted_size(const DotCase& c) {
  int64_t k = 1;
  for (int64_t d : c.dn.lhs_contracting) k *= c.lhs[static_cast<size_t>(d)];
  return k;
}

bool same_bits(const Buffer& a, const Buffer& b) {
  // An empty buffer may have no storage: memcmp must not see its null pointer.
  return a.shape == b.shape &&
         (a.num_bytes() == 0 || std::memcmp(a.bytes->data(), b.bytes->data(), a.num_bytes()) == 0);
}

class DotBackends : public ::testing::TestWithParam<DotCase> {};

TEST_P(DotBackends, OneDnnMatchesOpenBlasWithinTheSummationBound) {
  const DotCase& c = GetParam();
  const Buffer lhs = testing::normal_array(c.lhs, 1).buffer();
  const Buffer rhs = testing::normal_array(c.rhs, 2).buffer();
  ASSERT_TRUE(strided_matmul(c.lhs, c.rhs, c.dn).has_value())
      << "these operands lie so that oneDNN reads them in place";
  const Buffer onednn = dot_general_kernel(lhs, rhs, c.dn, DotBackend::onednn);
  const Buffer openblas = dot_general_kernel(lhs, rhs, c.dn, DotBackend::openblas);
  const Buffer magnitudes = dot_general_kernel(magnitudes_f64(lhs), magnitudes_f64(rhs), c.dn);
  ASSERT_EQ(onednn.shape, openblas.shape);
  const Array magnitude_array(magnitudes);
  testing::expect_within_summation_bound(Array(onednn), Array(openblas),
                                         magnitude_array.to_doubles(), contracted_size(c));
}

DotDimensionNumbers dims(std::vector<int64_t> lhs_contracting, std::vector<int64_t> rhs_contracting,
                         std::vector<int64_t> lhs_batch = {}, std::vector<int64_t> rhs_batch = {}) {
  return {std::move(lhs_contracting), std::move(rhs_contracting), std::move(lhs_batch),
          std::move(rhs_batch)};
}

INSTANTIATE_TEST_SUITE_P(
    DimensionNumbers, DotBackends,
    ::testing::Values(
        // Matrices: [M, K] @ [K, N], and with either operand or both transposed.
        DotCase{"MatrixNN", {5, 6}, {6, 3}, dims({1}, {0})},
        DotCase{"MatrixTN", {6, 5}, {6, 3}, dims({0}, {0})},
        DotCase{"MatrixNT", {5, 6}, {3, 6}, dims({1}, {1})},
        DotCase{"MatrixTT", {6, 5}, {3, 6}, dims({0}, {1})},
        DotCase{"MatrixVector", {5, 6}, {6}, dims({1}, {0})},
        DotCase{"VectorVector", {6}, {6}, dims({0}, {0})},
        // The mlp2-fmnist layer and its weight gradient (K = 784 and 64).
        DotCase{"DenseLayer", {64, 784}, {784, 256}, dims({1}, {0})},
        DotCase{"DenseWeightGradient", {64, 784}, {64, 256}, dims({0}, {0})},
        // Several contracting or free dimensions that lie as one.
        DotCase{"TwoContracting", {3, 4, 5}, {4, 5, 2}, dims({1, 2}, {0, 1})},
        DotCase{"TwoFree", {3, 4, 5}, {5, 2, 3}, dims({2}, {0})},
        // Batch dimensions: leading, not leading, in another order on each side, size 1.
        DotCase{"BatchLeading", {4, 5, 6}, {4, 6, 3}, dims({2}, {1}, {0}, {0})},
        DotCase{"BatchInTheMiddle", {5, 4, 6}, {6, 4, 3}, dims({2}, {0}, {1}, {1})},
        DotCase{"BatchLast", {5, 6, 4}, {3, 6, 4}, dims({1}, {1}, {2}, {2})},
        DotCase{"BatchesReordered", {2, 3, 5, 6}, {3, 2, 6, 4}, dims({3}, {2}, {0, 1}, {1, 0})},
        DotCase{"BatchOfOne", {1, 5, 6}, {1, 6, 3}, dims({2}, {1}, {0}, {0})},
        DotCase{"SizeOneDimensions", {1, 5, 1, 6}, {1, 6, 1, 3}, dims({3}, {1}, {0, 2}, {0, 2})},
        // Attention (linen/attention.cpp) on vit-fmnist's shapes: logits q . k over depth
        // batched over (batch, heads), weights . v, and
        // the VJPs for k (the cotangent read transposed) and for the weights.
        DotCase{
            "AttentionLogits", {32, 49, 4, 16}, {32, 49, 4, 16}, dims({3}, {3}, {0, 2}, {0, 2})},
        DotCase{
            "AttentionValues", {32, 4, 49, 49}, {32, 49, 4, 16}, dims({3}, {1}, {0, 1}, {0, 2})},
        DotCase{"AttentionLogitsKeyGradient",
                {32, 4, 49, 49},
                {32, 49, 4, 16},
                dims({2}, {1}, {0, 1}, {0, 2})},
        DotCase{"AttentionValuesWeightGradient",
                {32, 4, 49, 16},
                {32, 49, 4, 16},
                dims({3}, {3}, {0, 1}, {0, 2})},
        // Odd sizes, so the kernels' edge blocks run.
        DotCase{"OddAttention", {3, 13, 5, 7}, {3, 11, 5, 7}, dims({3}, {3}, {0, 2}, {0, 2})}),
    [](const ::testing::TestParamInfo<DotCase>& test) { return test.param.name; });

TEST(DotBackendsLayout, OperandsThatDoNotLieAsOneMatrixTakeTheOpenBlasPath) {
  // rhs's contracting dimensions (1, 0) in the listed order are not one strided dimension.
  const DotCase c{"", {3, 4, 5}, {5, 4, 2}, dims({1, 2}, {1, 0})};
  EXPECT_FALSE(strided_matmul(c.lhs, c.rhs, c.dn).has_value());
  const Buffer lhs = testing::normal_array(c.lhs, 1).buffer();
  const Buffer rhs = testing::normal_array(c.rhs, 2).buffer();
  EXPECT_TRUE(same_bits(dot_general_kernel(lhs, rhs, c.dn, DotBackend::onednn),
                        dot_general_kernel(lhs, rhs, c.dn, DotBackend::openblas)));
}

TEST(DotBackendsLayout, AttentionOperandsAreReadInPlaceThroughTheirStrides) {
  // q, k: [batch 2, length 7, heads 3, depth 5] -> [2, 3, 7, 7], batched over (batch, heads).
  const auto matmul = strided_matmul({2, 7, 3, 5}, {2, 7, 3, 5}, dims({3}, {3}, {0, 2}, {0, 2}));
  ASSERT_TRUE(matmul.has_value());
  EXPECT_EQ(matmul->batch, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(matmul->m, 7);
  EXPECT_EQ(matmul->k, 5);
  EXPECT_EQ(matmul->n, 7);
  EXPECT_EQ(matmul->lhs_strides, (std::vector<int64_t>{105, 5, 15, 1}));  // [b, h, M, K]
  EXPECT_EQ(matmul->rhs_strides, (std::vector<int64_t>{105, 5, 1, 15}));  // [b, h, K, N]
  // Batch dimensions that lie as one in both operands become one.
  const auto merged = strided_matmul({2, 3, 5, 6}, {2, 3, 6, 4}, dims({3}, {2}, {0, 1}, {0, 1}));
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->batch, (std::vector<int64_t>{6}));
}

TEST(DotBackendsLayout, EmptyOperandsGiveEmptyOrZeroResultsOnEitherPath) {
  for (const DotCase& c : {DotCase{"no rows", {0, 6}, {6, 3}, dims({1}, {0})},
                           DotCase{"no batch", {0, 5, 6}, {0, 6, 3}, dims({2}, {1}, {0}, {0})},
                           DotCase{"empty sum", {5, 0}, {0, 3}, dims({1}, {0})}}) {
    const Buffer lhs = testing::normal_array(c.lhs, 1).buffer();
    const Buffer rhs = testing::normal_array(c.rhs, 2).buffer();
    const Buffer onednn = dot_general_kernel(lhs, rhs, c.dn, DotBackend::onednn);
    EXPECT_TRUE(same_bits(onednn, dot_general_kernel(lhs, rhs, c.dn, DotBackend::openblas)))
        << c.name;
    for (size_t i = 0; i < onednn.num_elements(); ++i) EXPECT_EQ(onednn.data<float>()[i], 0.0f);
  }
}

TEST(DotBackendsLayout, DeviceThreadsSharingAPrimitiveGetTheSingleThreadedBits) {
  // As pmap's devices do: several threads run the same cached primitive at once.
  const DotCase c{"", {8, 49, 4, 16}, {8, 49, 4, 16}, dims({3}, {3}, {0, 2}, {0, 2})};
  const Buffer lhs = testing::normal_array(c.lhs, 1).buffer();
  const Buffer rhs = testing::normal_array(c.rhs, 2).buffer();
  const Buffer expected = dot_general_kernel(lhs, rhs, c.dn, DotBackend::onednn);
  std::vector<Buffer> results(4);
  std::vector<std::thread> threads;
  for (Buffer& result : results) {
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 20; ++repeat) {
        result = dot_general_kernel(lhs, rhs, c.dn, DotBackend::onednn);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Buffer& result : results) EXPECT_TRUE(same_bits(result, expected));
}

}  // namespace
}  // namespace pmap_engine
