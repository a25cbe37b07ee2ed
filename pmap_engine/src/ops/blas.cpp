#include "ops/blas.h"

#include <climits>
#include <mutex>
#include <string>

#include "pmap_engine/array.h"

namespace pmap_engine {
namespace {

// Integer products and sums wrap modulo 2^32 (unsigned arithmetic: no signed-overflow UB).
template <typename Integer>
void integer_matrix_multiply(const Integer* a, const Integer* b, Integer* c, size_t m, size_t n,
                             size_t k) {
  for (size_t row = 0; row < m; ++row) {
    for (size_t col = 0; col < n; ++col) {
      uint32_t total = 0;
      for (size_t i = 0; i < k; ++i) {
        total += static_cast<uint32_t>(a[row * k + i]) * static_cast<uint32_t>(b[i * n + col]);
      }
      c[row * n + col] = static_cast<Integer>(total);
    }
  }
}

}  // namespace

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

int blas_int(const char* op, size_t value) {
  if (value > static_cast<size_t>(INT_MAX)) {
    throw EngineError(std::string(op) + ": matrix dimension " + std::to_string(value) +
                      " exceeds the BLAS interface's int range");
  }
  return static_cast<int>(value);
}

void matrix_multiply(const char* op, const float* a, const float* b, float* c, size_t m, size_t n,
                     size_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(op, m), blas_int(op, n),
              blas_int(op, k), 1.0f, a, blas_int(op, k), b, blas_int(op, n), 0.0f, c,
              blas_int(op, n));
}

void matrix_multiply(const char* op, const double* a, const double* b, double* c, size_t m,
                     size_t n, size_t k) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(op, m), blas_int(op, n),
              blas_int(op, k), 1.0, a, blas_int(op, k), b, blas_int(op, n), 0.0, c,
              blas_int(op, n));
}

void accumulate_transposed_product(const char* op, const float* a, const float* b, float* c,
                                   size_t m, size_t n, size_t k) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blas_int(op, m), blas_int(op, n),
              blas_int(op, k), 1.0f, a, blas_int(op, m), b, blas_int(op, n), 1.0f, c,
              blas_int(op, n));
}

void accumulate_transposed_product(const char* op, const double* a, const double* b, double* c,
                                   size_t m, size_t n, size_t k) {
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blas_int(op, m), blas_int(op, n),
              blas_int(op, k), 1.0, a, blas_int(op, m), b, blas_int(op, n), 1.0, c,
              blas_int(op, n));
}

void matrix_multiply(const char*, const int32_t* a, const int32_t* b, int32_t* c, size_t m,
                     size_t n, size_t k) {
  integer_matrix_multiply(a, b, c, m, n, k);
}

void matrix_multiply(const char*, const uint32_t* a, const uint32_t* b, uint32_t* c, size_t m,
                     size_t n, size_t k) {
  integer_matrix_multiply(a, b, c, m, n, k);
}

}  // namespace pmap_engine
