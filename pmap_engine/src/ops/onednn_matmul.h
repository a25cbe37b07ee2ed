// A stack of f32 matrix products on oneDNN's matmul primitive, each operand read in place
// through its strides:
//   out[b..., M, N] = lhs[b..., M, K] @ rhs[b..., K, N]   (out dense, row-major)
// where lhs and rhs may lie in memory in any dimension order: a transposed operand, or batch
// dimensions between the matrix ones (attention's [batch, length, heads, depth] operands,
// batched over batch and heads). No operand is copied or packed by the caller; the primitive is
// built once per shape and strides (ops/onednn_runtime.h's cache, one OpenMP thread per call).
//
// Summation order. oneDNN's kernels (the brgemm kernels on AVX-512, a jit gemm on AVX2) sum K
// in their own blocking with FMAs; single-threaded, a call gives the same bits every run on the
// same CPU, and like OpenBLAS's (ops/blas.h) they differ between CPU models in the last bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pmap_engine {

// oneDNN's tensors have at most 12 dimensions (DNNL_MAX_NDIMS): M and N, and 10 batch ones.
constexpr size_t kMaxMatmulBatchDims = 10;

struct StridedMatmul {
  std::vector<int64_t> batch;  // batch sizes, shared by both operands and the output
  int64_t m = 1;
  int64_t k = 1;
  int64_t n = 1;
  // Element strides: lhs of its [batch..., M, K] dimensions, rhs of its [batch..., K, N].
  std::vector<int64_t> lhs_strides;
  std::vector<int64_t> rhs_strides;
};

// Whether oneDNN runs its AVX-512 kernels here (the CPU has them, and DNNL_MAX_CPU_ISA allows
// them); otherwise it runs AVX2 ones.
bool onednn_has_avx512();

// Computes `product`; every size must be positive.
void onednn_matmul(const StridedMatmul& product, const float* lhs, const float* rhs, float* out);

}  // namespace pmap_engine
