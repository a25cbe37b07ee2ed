#include "ops/onednn_matmul.h"

#include <cstddef>
#include <memory>

#include "ops/kernel_util.h"
#include "ops/onednn_runtime.h"

namespace pmap_engine {
namespace {

using dnnl::memory;

struct MatmulPrimitive {
  memory::desc lhs;
  memory::desc rhs;
  memory::desc out;
  memory::desc scratchpad;
  dnnl::matmul matmul;
};

// [batch..., rows, cols] with the given element strides.
memory::desc strided_desc(const StridedMatmul& product, int64_t rows, int64_t cols,
                          const memory::dims& strides) {
  memory::dims dims(product.batch.begin(), product.batch.end());
  dims.push_back(rows);
  dims.push_back(cols);
  return memory::desc(dims, memory::data_type::f32, strides);
}

MatmulPrimitive make_primitive(const StridedMatmul& product) {
  MatmulPrimitive made;
  made.lhs = strided_desc(product, product.m, product.k, product.lhs_strides);
  made.rhs = strided_desc(product, product.k, product.n, product.rhs_strides);
  Shape out_shape = product.batch;
  out_shape.insert(out_shape.end(), {product.m, product.n});
  made.out = strided_desc(product, product.m, product.n, row_major_strides(out_shape));
  const dnnl::matmul::primitive_desc desc(dnnl::matmul::desc(made.lhs, made.rhs, made.out),
                                          user_scratchpad_attr(), onednn_engine());
  made.scratchpad = desc.scratchpad_desc();
  made.matmul = dnnl::matmul(desc);
  return made;
}

std::vector<int64_t> cache_key(const StridedMatmul& product) {
  std::vector<int64_t> key = {static_cast<int64_t>(product.batch.size())};
  key.insert(key.end(), product.batch.begin(), product.batch.end());
  key.insert(key.end(), {product.m, product.k, product.n});
  key.insert(key.end(), product.lhs_strides.begin(), product.lhs_strides.end());
  key.insert(key.end(), product.rhs_strides.begin(), product.rhs_strides.end());
  return key;
}

}  // namespace

bool onednn_has_avx512() {
  // The cpu_isa values are sets of feature bits: every AVX-512 level includes avx512_core's.
  static const bool has = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & avx512) == avx512;
  }();
  return has;
}

void onednn_matmul(const StridedMatmul& product, const float* lhs, const float* rhs, float* out) {
  static OneDnnCache<MatmulPrimitive> cache;
  OneDnnCall call;
  const MatmulPrimitive& primitive =
      cache.get(cache_key(product), [&] { return make_primitive(product); });
  const dnnl::engine& engine = onednn_engine();
  // oneDNN's memory objects take non-const pointers; the source operands are only read.
  memory lhs_memory(primitive.lhs, engine, const_cast<float*>(lhs));
  memory rhs_memory(primitive.rhs, engine, const_cast<float*>(rhs));
  memory out_memory(primitive.out, engine, out);
  primitive.matmul.execute(call.stream(),
                           {{DNNL_ARG_SRC, lhs_memory},
                            {DNNL_ARG_WEIGHTS, rhs_memory},
                            {DNNL_ARG_DST, out_memory},
                            {DNNL_ARG_SCRATCHPAD, call.scratchpad(primitive.scratchpad)}});
  call.stream().wait();
}

}  // namespace pmap_engine
