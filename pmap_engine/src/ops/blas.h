// The engine's gemm on OpenBLAS, shared by dot_general (dot.cpp) and conv_general_dilated
// (conv.cpp): row-major c[M, N] = a[M, K] @ b[K, N] in f32 (cblas_sgemm), f64 (cblas_dgemm), or
// i32/u32 (a plain loop wrapping modulo 2^32, as XLA's integer dots do); and, for conv's kernel
// gradient, c[M, N] += a[K, M]^T @ b[K, N] in f32 and f64.
//
// OpenBLAS runs single-threaded (use_single_threaded_blas): its threaded driver blocks the K
// loop differently from the single-threaded one, so results would depend on the host's core
// count (dot.cpp's header has the measurements), and the engine's devices already use the
// cores, one thread each.
#pragma once

#include <cblas.h>

#include <cstddef>
#include <cstdint>

namespace pmap_engine {

// Once per process, before the first gemm; every caller of cblas_* calls it first.
void use_single_threaded_blas();

// `value` as a BLAS int; raises naming `op` when it does not fit.
int blas_int(const char* op, size_t value);

// c[M, N] = a[M, K] @ b[K, N], all row-major and dense; `op` names the caller in errors.
void matrix_multiply(const char* op, const float* a, const float* b, float* c, size_t m, size_t n,
                     size_t k);
void matrix_multiply(const char* op, const double* a, const double* b, double* c, size_t m,
                     size_t n, size_t k);
void matrix_multiply(const char* op, const int32_t* a, const int32_t* b, int32_t* c, size_t m,
                     size_t n, size_t k);
void matrix_multiply(const char* op, const uint32_t* a, const uint32_t* b, uint32_t* c, size_t m,
                     size_t n, size_t k);

// c[M, N] += a[K, M]^T @ b[K, N], row-major and dense, a read transposed (conv's kernel
// gradient: patches^T @ cotangent, summed over chunks of images); f32 and f64.
void accumulate_transposed_product(const char* op, const float* a, const float* b, float* c,
                                   size_t m, size_t n, size_t k);
void accumulate_transposed_product(const char* op, const double* a, const double* b, double* c,
                                   size_t m, size_t n, size_t k);

}  // namespace pmap_engine
