#include "blas_info.h"

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>

namespace parity::bench {
namespace {
int default_num_threads = 0;  // what OpenBLAS had before use_single_threaded_blas()
}  // namespace

BlasInfo blas_info() {
  BlasInfo info;
  const char* corename = openblas_get_corename();
  const char* config = openblas_get_config();
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  info.corename = corename ? corename : "unknown";
  info.config = config ? config : "unknown";
  info.coretype_env = coretype && *coretype ? coretype : "unset";
  info.num_threads = openblas_get_num_threads();
  return info;
}

void add_blas_context() {
  const BlasInfo info = blas_info();
  benchmark::AddCustomContext("openblas_corename", info.corename);
  benchmark::AddCustomContext("openblas_config", info.config);
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", info.coretype_env);
  benchmark::AddCustomContext("openblas_num_threads", std::to_string(info.num_threads));
  if (default_num_threads > 0) {
    benchmark::AddCustomContext("openblas_default_num_threads",
                                std::to_string(default_num_threads));
  }
}

std::string blas_summary_line() {
  const BlasInfo info = blas_info();
  return "OpenBLAS: corename " + info.corename + ", OPENBLAS_CORETYPE " + info.coretype_env +
         ", " + std::to_string(info.num_threads) +
         (info.num_threads == 1 ? " thread" : " threads") + ", config: " + info.config;
}

void use_single_threaded_blas() {
  if (default_num_threads == 0) default_num_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
}

void reference_sgemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
                     const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, trans_a ? m : k, b,
              trans_b ? k : n, 0.0f, c, n);
}

}  // namespace parity::bench
