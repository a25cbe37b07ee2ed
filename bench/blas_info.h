// Which OpenBLAS the benchmarks ran on, for their context and summaries: the issue-4
// acceptance asks every BLAS comparison to state the kernel that ran. Machines may set
// OPENBLAS_CORETYPE (e.g. Haswell: AVX2 kernels even on AVX-512 CPUs); OpenBLAS reads it once,
// when the library loads, so both sides of a comparison in one process run the same kernel.
//
// Also the reference GEMM for the engine's dot_general: a direct cblas_sgemm. Kept out of the
// benchmark sources so that they need not include cblas.h next to LibTorch's headers.
#pragma once

#include <string>

namespace parity::bench {

struct BlasInfo {
  std::string corename;      // openblas_get_corename(): the kernel family that runs ("Zen", ...)
  std::string config;        // openblas_get_config(): version and build options
  std::string coretype_env;  // OPENBLAS_CORETYPE, or "unset"
  int num_threads = 0;       // openblas_get_num_threads() now
};

BlasInfo blas_info();

// Adds openblas_corename, openblas_config, OPENBLAS_CORETYPE and openblas_num_threads (and
// openblas_default_num_threads, the count before use_single_threaded_blas) to Google
// Benchmark's context (call before RunSpecifiedBenchmarks).
void add_blas_context();

// One line for a suite's summary: "OpenBLAS: corename Zen, OPENBLAS_CORETYPE unset, 1 thread,
// config ...".
std::string blas_summary_line();

// Makes OpenBLAS single-threaded, as the engine does before its first gemm (pmap_engine/src/ops/
// dot.cpp use_single_threaded_blas): LibTorch shares the same library, so this fixes the count
// for both sides of a comparison before any of them runs (the engine's own call, at its first
// gemm, would otherwise come after LibTorch's benchmarks ran with OpenBLAS's default count).
void use_single_threaded_blas();

// c[m, n] = op(a) @ op(b), row-major, alpha 1, beta 0: cblas_sgemm with a transposed
// ([k, m]) when trans_a and b transposed ([n, k]) when trans_b.
void reference_sgemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
                     const float* b, float* c);

}  // namespace parity::bench
