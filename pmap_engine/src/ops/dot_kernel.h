// dot_general's kernel (lax.dot_general; the primitive, its checks and its VJP are in dot.cpp).
//
// Vocabulary (lax's dimension numbers). Each dimension of an operand is exactly one of
//   batch        paired one-to-one with a batch dimension of the other operand (B);
//   contracting  paired with a contracting dimension of the other operand and summed over (K);
//   free         everything else: lhs free dimensions (M), rhs free dimensions (N).
// The output is [B..., M..., N...]: batch dimensions in lhs_batch order, then the lhs free and
// the rhs free dimensions in their operands' order (lax.py _dot_general_shape_computation).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/primitive.h"
#include "ops/onednn_matmul.h"
#include "pmap_engine/array.h"

namespace pmap_engine {

struct DotDimensionNumbers {
  std::vector<int64_t> lhs_contracting;
  std::vector<int64_t> rhs_contracting;
  std::vector<int64_t> lhs_batch;
  std::vector<int64_t> rhs_batch;

  static DotDimensionNumbers from(const ir::Params& params);
  ir::Params params() const;
};

// The dimensions of an ndim-operand that are neither in `a` nor in `b`, ascending (lax's
// `remaining`): the free dimensions.
std::vector<int64_t> remaining(int64_t ndim, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b);

// The sizes of `shape`'s dimensions `dims`, in that order.
Shape dims_of(const Shape& shape, const std::vector<int64_t>& dims);

// The output shape [B..., M..., N...] of operands whose dimension numbers have been checked.
Shape dot_general_shape(const Shape& lhs, const Shape& rhs, const DotDimensionNumbers& dn);

// The product as one oneDNN matmul over the operands in place, when each of its dimension
// groups (M, K, N; and the batch dimensions, which may stay apart) is laid out as one strided
// dimension in both operands' row-major memory; nullopt otherwise.
std::optional<StridedMatmul> strided_matmul(const Shape& lhs, const Shape& rhs,
                                            const DotDimensionNumbers& dn);

// Which library computes an f32 product (other dtypes always take the OpenBLAS path).
enum class DotBackend {
  automatic,  // oneDNN where strided_matmul reads the operands in place and it is the faster
              // library for the product (dot_kernel.cpp, prefers_onednn), else OpenBLAS
  openblas,   // operands packed to row-major matrices, then a gemm per batch element
  onednn,     // oneDNN where strided_matmul allows, else OpenBLAS (tests pick the paths apart)
};

// lhs: [.., M.., K..], rhs: [.., K.., N..] -> out: [B.., M.., N..]
Buffer dot_general_kernel(const Buffer& lhs, const Buffer& rhs, const DotDimensionNumbers& dn,
                          DotBackend backend = DotBackend::automatic);

}  // namespace pmap_engine
