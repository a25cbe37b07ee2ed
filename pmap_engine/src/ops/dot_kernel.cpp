// Two paths compute a product.
//
// f32 products whose operands oneDNN can read in place (strided_matmul) run as one oneDNN
// matmul over the whole batch (ops/onednn_matmul.h): no operand is copied, and the batch is one
// call. That is attention's case: its einsums batch over dimensions that are not leading
// ([batch, length, heads, depth] operands), which the OpenBLAS path packs into a [B, M, K]
// stack before running one small sgemm per batch element, where OpenBLAS's own packing of
// each tiny matrix (sgemm_oncopy/otcopy) then costs more than the arithmetic. Plain matrix
// products go to whichever library is faster on the CPU (prefers_onednn).
//
// Everything else takes the OpenBLAS path. Each operand is *packed* into a row-major matrix
// stack, lhs as [B, M, K] and rhs as [B, K, N] (B, M, K, N the products of those dimension
// groups; K in the order the contracting dimensions are listed, so that lhs_contracting[i]
// meets rhs_contracting[i]), and converted to the compute type on the way. Then per batch:
// C[b] = A[b] @ B[b] with
//   f32        cblas_sgemm;
//   f64        cblas_dgemm;
//   bf16, f16  converted to f32, cblas_sgemm (f32 accumulation), rounded back to nearest even
//              once per output element (the engine's rule for 16-bit floats, dtype.h);
//   i32, u32   a plain loop, wrapping modulo 2^32 as XLA's integer dots do.
// C[B, M, N] is already the output layout. Without batch dimensions, operands that already are
// (possibly transposed) matrices in memory skip the packing: one gemm with BLAS's transpose
// flags (try_direct_gemm).
//
// Determinism of sgemm (measured with Debian's OpenBLAS 0.3.21, pthread, DYNAMIC_ARCH, on an
// AMD EPYC, by comparing the bits of cblas_sgemm's results after openblas_set_num_threads(t)
// for t = 1..16, M and N from 2 to 4096, K from 64 to 50000):
//   - one call on the same inputs gives the same bits on every run;
//   - 2, 3, 4, 5, 7, 8 and 16 threads gave bitwise identical results for every shape tried;
//   - but 1 thread versus several differs in the last bits of most elements for most K above
//     ~384 (400, 513, 784, 1025, 2000 differ; 1024 and 1600 do not) once M and N are large
//     enough for OpenBLAS to thread at all (64x256, 784x64 yes; 64x16, 10x10 no):
//     [64,784] @ [784,256], the MNIST MLP's first layer, is affected; its weight gradient
//     [784,64] @ [64,256] (K=64) and the second layer [64,256] @ [256,10] are not. The
//     single-threaded and threaded drivers block the K loop differently, which changes the
//     summation order.
// So results depend on whether OpenBLAS runs threaded (OPENBLAS_NUM_THREADS, the core count of
// the host), and across CPU models (DYNAMIC_ARCH picks the kernel at run time). The engine
// therefore runs OpenBLAS single-threaded (use_single_threaded_blas, ops/blas.h), and oneDNN on
// one OpenMP thread per call (ops/onednn_runtime.h): results do not depend on the host's core
// count, and devices (one thread each) already use the cores.
#include "ops/dot_kernel.h"

#include <algorithm>
#include <array>
#include <type_traits>

#include "ops/blas.h"
#include "ops/kernel_util.h"

namespace pmap_engine {

DotDimensionNumbers DotDimensionNumbers::from(const ir::Params& params) {
  return {params.ints("lhs_contracting"), params.ints("rhs_contracting"), params.ints("lhs_batch"),
          params.ints("rhs_batch")};
}

ir::Params DotDimensionNumbers::params() const {
  return {{"lhs_contracting", lhs_contracting},
          {"rhs_contracting", rhs_contracting},
          {"lhs_batch", lhs_batch},
          {"rhs_batch", rhs_batch}};
}

std::vector<int64_t> remaining(int64_t ndim, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < ndim; ++d) {
    if (std::find(a.begin(), a.end(), d) == a.end() &&
        std::find(b.begin(), b.end(), d) == b.end()) {
      rest.push_back(d);
    }
  }
  return rest;
}

Shape dims_of(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape sizes;
  for (int64_t d : dims) sizes.push_back(shape[static_cast<size_t>(d)]);
  return sizes;
}

Shape dot_general_shape(const Shape& lhs, const Shape& rhs, const DotDimensionNumbers& dn) {
  Shape out = dims_of(lhs, dn.lhs_batch);
  const int64_t lhs_ndim = static_cast<int64_t>(lhs.size());
  const int64_t rhs_ndim = static_cast<int64_t>(rhs.size());
  for (int64_t size : dims_of(lhs, remaining(lhs_ndim, dn.lhs_contracting, dn.lhs_batch))) {
    out.push_back(size);
  }
  for (int64_t size : dims_of(rhs, remaining(rhs_ndim, dn.rhs_contracting, dn.rhs_batch))) {
    out.push_back(size);
  }
  return out;
}

namespace {

size_t product(const Shape& sizes) { return shape_num_elements(sizes); }

// --- the oneDNN path ---

// The stride of dimensions `dims` of a row-major operand read as one dimension (the product of
// their sizes), when they lie in memory as one: each dimension's stride is the next one's
// times that one's size (size-1 dimensions, which any stride reads, skipped). nullopt when they
// do not.
std::optional<int64_t> merged_stride(const Shape& shape, const std::vector<int64_t>& strides,
                                     const std::vector<int64_t>& dims) {
  std::optional<int64_t> innermost;
  int64_t expected = 0;  // the stride the next dimension outwards must have
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    const int64_t size = shape[static_cast<size_t>(*d)];
    const int64_t stride = strides[static_cast<size_t>(*d)];
    if (size == 1) continue;
    if (innermost && stride != expected) return std::nullopt;
    if (!innermost) innermost = stride;
    expected = stride * size;
  }
  return innermost.value_or(1);
}

}  // namespace

std::optional<StridedMatmul> strided_matmul(const Shape& lhs, const Shape& rhs,
                                            const DotDimensionNumbers& dn) {
  const std::vector<int64_t> lhs_strides = row_major_strides(lhs);
  const std::vector<int64_t> rhs_strides = row_major_strides(rhs);
  StridedMatmul matmul;
  // Batch dimensions stay apart unless neighbours lie as one in both operands; size-1 ones go.
  for (size_t i = 0; i < dn.lhs_batch.size(); ++i) {
    const auto l = static_cast<size_t>(dn.lhs_batch[i]);
    const auto r = static_cast<size_t>(dn.rhs_batch[i]);
    const int64_t size = lhs[l];
    if (size == 1) continue;
    if (!matmul.batch.empty() && matmul.lhs_strides.back() == lhs_strides[l] * size &&
        matmul.rhs_strides.back() == rhs_strides[r] * size) {
      matmul.batch.back() *= size;
      matmul.lhs_strides.back() = lhs_strides[l];
      matmul.rhs_strides.back() = rhs_strides[r];
      continue;
    }
    matmul.batch.push_back(size);
    matmul.lhs_strides.push_back(lhs_strides[l]);
    matmul.rhs_strides.push_back(rhs_strides[r]);
  }
  if (matmul.batch.size() > kMaxMatmulBatchDims) return std::nullopt;
  const std::vector<int64_t> lhs_free =
      remaining(static_cast<int64_t>(lhs.size()), dn.lhs_contracting, dn.lhs_batch);
  const std::vector<int64_t> rhs_free =
      remaining(static_cast<int64_t>(rhs.size()), dn.rhs_contracting, dn.rhs_batch);
  const auto m_stride = merged_stride(lhs, lhs_strides, lhs_free);
  const auto lhs_k_stride = merged_stride(lhs, lhs_strides, dn.lhs_contracting);
  const auto rhs_k_stride = merged_stride(rhs, rhs_strides, dn.rhs_contracting);
  const auto n_stride = merged_stride(rhs, rhs_strides, rhs_free);
  if (!m_stride || !lhs_k_stride || !rhs_k_stride || !n_stride) return std::nullopt;
  matmul.m = static_cast<int64_t>(product(dims_of(lhs, lhs_free)));
  matmul.k = static_cast<int64_t>(product(dims_of(lhs, dn.lhs_contracting)));
  matmul.n = static_cast<int64_t>(product(dims_of(rhs, rhs_free)));
  matmul.lhs_strides.insert(matmul.lhs_strides.end(), {*m_stride, *lhs_k_stride});
  matmul.rhs_strides.insert(matmul.rhs_strides.end(), {*rhs_k_stride, *n_stride});
  return matmul;
}

namespace {

// Whether DotBackend::automatic runs a product that strided_matmul accepts on oneDNN. Always
// with batch dimensions: OpenBLAS would take packed copies and a call per batch element. A
// plain matrix product OpenBLAS runs from the operands as they are, and which library is
// faster depends on the CPU; measured single-threaded on the cases' dense layers (mlp2-fmnist's
// [64 or 512, 784] @ [784, 256] and [.., 256] @ [256, 10] with their gradients, vit-fmnist's
// [1568, 64] @ [64, 64 or 128] and back; bench/engine_step_bench.cpp's Gemm rows time mlp2's
// against cblas_sgemm):
//   - where oneDNN has AVX-512 (Intel), its brgemm kernels took 0.3-1.0x the time of
//     OpenBLAS's AVX2 (Haswell) kernels, and a tenth to a third of it where OpenBLAS does not
//     know the CPU model and falls back to its SSE3 (Prescott) kernels, as 0.3.21 does on
//     recent Xeons;
//   - with AVX2 only (AMD), oneDNN's jit gemm took 1.2-2.5x OpenBLAS's time on mlp2's
//     64-row shapes (one device of its 8) and about the same on the others;
//   - below 2^16 multiply-adds (vit's 10-class head, [32, 64] @ [64, 10]) oneDNN's fixed cost
//     per call (its memory objects, the OpenMP setting) exceeds OpenBLAS's whole call.
bool prefers_onednn(const StridedMatmul& matmul) {
  if (!matmul.batch.empty()) return true;
  constexpr int64_t kSmallProduct = int64_t{1} << 16;  // multiply-adds
  return onednn_has_avx512() && matmul.m * matmul.n * matmul.k >= kSmallProduct;
}

// --- the OpenBLAS path ---

// An operand packed as a row-major [num_batches, num_rows, num_cols] stack in the compute type.
template <typename Compute>
struct PackedOperand {
  std::vector<Compute> values;
  size_t num_batches = 1;
  size_t num_rows = 1;
  size_t num_cols = 1;
  const Compute* matrix(size_t batch) const { return values.data() + batch * num_rows * num_cols; }
};

// Packs `operand` with its dimensions reordered as batch, rows, cols (a transpose-and-convert).
template <typename Element>
PackedOperand<typename Element::Compute> pack(const Buffer& operand,
                                              const std::vector<int64_t>& batch_dims,
                                              const std::vector<int64_t>& row_dims,
                                              const std::vector<int64_t>& col_dims) {
  PackedOperand<typename Element::Compute> packed;
  packed.num_batches = product(dims_of(operand.shape, batch_dims));
  packed.num_rows = product(dims_of(operand.shape, row_dims));
  packed.num_cols = product(dims_of(operand.shape, col_dims));
  packed.values.resize(operand.num_elements());
  std::vector<int64_t> order = batch_dims;
  order.insert(order.end(), row_dims.begin(), row_dims.end());
  order.insert(order.end(), col_dims.begin(), col_dims.end());
  const std::vector<int64_t> strides = row_major_strides(operand.shape);
  std::vector<int64_t> packed_strides;
  for (int64_t d : order) packed_strides.push_back(strides[static_cast<size_t>(d)]);
  const auto* source = operand.data<typename Element::Storage>();
  for_each_strided<1>(dims_of(operand.shape, order), {packed_strides},
                      [&](size_t packed_index, const std::array<int64_t, 1>& offset) {
                        packed.values[packed_index] =
                            Element::load(source[static_cast<size_t>(offset[0])]);
                      });
  return packed;
}

// Whether `first` then `second` lists the dimensions 0..n-1 in order: the operand is then
// already a row-major [product(first), product(second)] matrix in memory.
bool is_row_major_split(const std::vector<int64_t>& first, const std::vector<int64_t>& second,
                        size_t ndim) {
  std::vector<int64_t> order = first;
  order.insert(order.end(), second.begin(), second.end());
  if (order.size() != ndim) return false;
  for (size_t i = 0; i < ndim; ++i) {
    if (order[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// The common case without batch dimensions, when both operands are already matrices in
// memory (possibly transposed): one gemm straight from the buffers into the output, with
// BLAS's transpose flags instead of packed copies (x @ W, and its VJPs g @ W^T, x^T @ g).
template <typename T>
bool try_direct_gemm(const Buffer& lhs, const Buffer& rhs, const DotDimensionNumbers& dn,
                     const std::vector<int64_t>& lhs_free, const std::vector<int64_t>& rhs_free,
                     Buffer& out) {
  if (!dn.lhs_batch.empty()) return false;
  const size_t m = product(dims_of(lhs.shape, lhs_free));
  const size_t k = product(dims_of(lhs.shape, dn.lhs_contracting));
  const size_t n = product(dims_of(rhs.shape, rhs_free));
  if (m == 0 || n == 0 || k == 0) return false;
  CBLAS_TRANSPOSE lhs_trans;
  CBLAS_TRANSPOSE rhs_trans;
  if (is_row_major_split(lhs_free, dn.lhs_contracting, lhs.shape.size())) {
    lhs_trans = CblasNoTrans;  // [M, K]
  } else if (is_row_major_split(dn.lhs_contracting, lhs_free, lhs.shape.size())) {
    lhs_trans = CblasTrans;  // [K, M]
  } else {
    return false;
  }
  if (is_row_major_split(dn.rhs_contracting, rhs_free, rhs.shape.size())) {
    rhs_trans = CblasNoTrans;  // [K, N]
  } else if (is_row_major_split(rhs_free, dn.rhs_contracting, rhs.shape.size())) {
    rhs_trans = CblasTrans;  // [N, K]
  } else {
    return false;
  }
  auto to_int = [](size_t value) { return blas_int("dot_general", value); };
  const int lda = to_int(lhs_trans == CblasNoTrans ? k : m);
  const int ldb = to_int(rhs_trans == CblasNoTrans ? n : k);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, lhs_trans, rhs_trans, to_int(m), to_int(n), to_int(k), 1.0f,
                lhs.data<float>(), lda, rhs.data<float>(), ldb, 0.0f, out.data<float>(), to_int(n));
  } else {
    cblas_dgemm(CblasRowMajor, lhs_trans, rhs_trans, to_int(m), to_int(n), to_int(k), 1.0,
                lhs.data<double>(), lda, rhs.data<double>(), ldb, 0.0, out.data<double>(),
                to_int(n));
  }
  return true;
}

void openblas_dot_general(const Buffer& lhs, const Buffer& rhs, const DotDimensionNumbers& dn,
                          Buffer& out) {
  use_single_threaded_blas();
  const std::vector<int64_t> lhs_free =
      remaining(static_cast<int64_t>(lhs.shape.size()), dn.lhs_contracting, dn.lhs_batch);
  const std::vector<int64_t> rhs_free =
      remaining(static_cast<int64_t>(rhs.shape.size()), dn.rhs_contracting, dn.rhs_batch);
  if (lhs.dtype == DType::f32 && try_direct_gemm<float>(lhs, rhs, dn, lhs_free, rhs_free, out)) {
    return;
  }
  if (lhs.dtype == DType::f64 && try_direct_gemm<double>(lhs, rhs, dn, lhs_free, rhs_free, out)) {
    return;
  }
  dispatch_numeric(lhs.dtype, [&](auto element) {
    using Element = decltype(element);
    using Compute = typename Element::Compute;
    const auto a = pack<Element>(lhs, dn.lhs_batch, lhs_free, dn.lhs_contracting);  // [B, M, K]
    const auto b = pack<Element>(rhs, dn.rhs_batch, dn.rhs_contracting, rhs_free);  // [B, K, N]
    const size_t m = a.num_rows, k = a.num_cols, n = b.num_cols;
    if (m == 0 || n == 0) return;  // no element
    std::vector<Compute> c(a.num_batches * m * n);
    for (size_t batch = 0; batch < a.num_batches; ++batch) {
      matrix_multiply("dot_general", a.matrix(batch), b.matrix(batch), c.data() + batch * m * n, m,
                      n, k);
    }
    auto* output = out.data<typename Element::Storage>();
    for (size_t i = 0; i < c.size(); ++i) output[i] = Element::store(c[i]);
  });
}

}  // namespace

Buffer dot_general_kernel(const Buffer& lhs, const Buffer& rhs, const DotDimensionNumbers& dn,
                          DotBackend backend) {
  const Shape out_shape = dot_general_shape(lhs.shape, rhs.shape, dn);
  // Every element is written by the product below, except in an empty sum, which is zero.
  if (product(dims_of(lhs.shape, dn.lhs_contracting)) == 0) {
    return Buffer::allocate(lhs.dtype, out_shape);
  }
  Buffer out = Buffer::allocate_uninitialized(lhs.dtype, out_shape);
  if (out.num_elements() == 0) return out;
  if (lhs.dtype == DType::f32 && backend != DotBackend::openblas) {
    const auto matmul = strided_matmul(lhs.shape, rhs.shape, dn);
    if (matmul && (backend == DotBackend::onednn || prefers_onednn(*matmul))) {
      onednn_matmul(*matmul, lhs.data<float>(), rhs.data<float>(), out.data<float>());
      return out;
    }
  }
  openblas_dot_general(lhs, rhs, dn, out);
  return out;
}

}  // namespace pmap_engine
