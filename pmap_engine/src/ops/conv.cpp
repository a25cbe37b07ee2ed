// conv_general_dilated (lax.conv_general_dilated) for flax.linen.Conv's layout, its VJP, the
// lax.rev primitive the VJP flips the kernel with, and conv_general_dilated_transpose_rhs, the
// kernel's cotangent as one primitive. Source modelled: jax-ml/jax commit cec06d1,
// jax/_src/lax/convolution.py.
//
// Layout (dimension_numbers ("NHWC", "HWIO", "NHWC"), the only one supported):
//   lhs [B, H, W, C], rhs [KH, KW, C, O] -> out [B, H', W', O],
//   H' = stride_dim(dilate(H, lhs_dilation) + lo + hi, dilate(KH, rhs_dilation), stride)
// (ops/window_geometry.h). Params: window_strides (sh, sw), padding (lo_h, hi_h, lo_w, hi_w),
// lhs_dilation, rhs_dilation. Padding may be negative (the kernel's VJP needs that).
// feature_group_count is 1 (one group: one gemm per chunk of images below).
//
// Kernels, each one gemm per chunk of images on ops/blas.h's single-threaded OpenBLAS (as
// dot_general): f32 sgemm, f64 dgemm, bf16/f16 converted to f32 on the way in, summed in f32
// and rounded to nearest even once per output element (as dot_general does).
//   im2col   (conv, lhs not dilated) each output position (b, h', w') becomes a row of the
//            patch matrix holding its window's inputs in (kh, kw, c) order, zeros for padding
//            and dilation holes: patches [B * H' * W', KH * KW * C]. The HWIO kernel is already
//            the row-major matrix [KH * KW * C, O], so patches @ kernel is [B * H' * W', O],
//            the NHWC output itself.
//   scatter  (conv, lhs dilated: the input's cotangent) the gemm of the undilated input rows
//            with the kernel, then col2im adds each row's columns into the output positions
//            they reach; no zero of the dilation is multiplied (essay below).
//   kernel's cotangent  patches^T @ g: the forward's patch matrix, transposed into the gemm.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/primitive.h"
#include "ops/blas.h"
#include "ops/broadcasting.h"
#include "ops/kernel_util.h"
#include "ops/onednn_conv.h"
#include "ops/window_geometry.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

constexpr const char* kConvName = "conv_general_dilated";
constexpr const char* kConvTransposeRhsName = "conv_general_dilated_transpose_rhs";

// Patch matrices are built for as many images at a time as fit in this many elements (16 MiB
// in f32), so that a large batch does not need its whole im2col matrix in memory at once while
// each gemm still has thousands of rows.
constexpr size_t kPatchChunkElements = size_t{1} << 22;

struct ConvParams {
  std::vector<int64_t> window_strides;
  std::vector<PadPair> padding;
  std::vector<int64_t> lhs_dilation;
  std::vector<int64_t> rhs_dilation;

  static ConvParams from(const ir::Params& params) {
    const std::vector<PadPair> padding = pad_pairs_from_flat(params.ints("padding"));
    return {params.ints("window_strides"), padding, params.ints("lhs_dilation"),
            params.ints("rhs_dilation")};
  }
  ir::Params params() const {
    std::vector<int64_t> flat;
    for (const auto& [lo, hi] : padding) {
      flat.push_back(lo);
      flat.push_back(hi);
    }
    return {{"window_strides", window_strides},
            {"padding", flat},
            {"lhs_dilation", lhs_dilation},
            {"rhs_dilation", rhs_dilation}};
  }
  // Spatial dimension d (0: H, 1: W) of an input of `size` under a kernel of `window` taps.
  WindowDim dim(size_t d, int64_t size, int64_t window) const {
    return {size, window, window_strides[d], padding[d], lhs_dilation[d], rhs_dilation[d]};
  }
};

std::string operands_of(const ir::AbstractValue& lhs, const ir::AbstractValue& rhs) {
  return "lhs " + type_of(lhs) + " and rhs " + type_of(rhs);
}

// The operands' ranks, dtypes and feature sizes (shared by the public function, which needs
// the shapes to resolve a padding name, and abstract_eval).
void check_conv_operands(const ir::AbstractValue& lhs, const ir::AbstractValue& rhs) {
  const std::string operands = operands_of(lhs, rhs);
  if (lhs.shape.size() != 4 || rhs.shape.size() != 4) {
    throw EngineError(std::string(kConvName) +
                      ": expects a 4-D lhs [B, H, W, C] (NHWC) and a 4-D rhs [KH, KW, C, O] "
                      "(HWIO), got " +
                      operands);
  }
  if (lhs.dtype != rhs.dtype || !is_floating(lhs.dtype)) {
    throw EngineError(std::string(kConvName) +
                      ": operands must have the same floating-point dtype, got " + operands +
                      " (convert with astype)");
  }
  if (rhs.shape[2] != lhs.shape[3]) {
    throw EngineError(std::string(kConvName) + ": the kernel's in-features (rhs dimension 2, " +
                      std::to_string(rhs.shape[2]) + ") must equal the input's channels (lhs " +
                      "dimension 3, " + std::to_string(lhs.shape[3]) + "), got " + operands +
                      "; a kernel for this input has shape (" + std::to_string(rhs.shape[0]) +
                      ", " + std::to_string(rhs.shape[1]) + ", " + std::to_string(lhs.shape[3]) +
                      ", " + std::to_string(rhs.shape[3]) + ")");
  }
}

void check_positive(const char* what, const std::vector<int64_t>& values,
                    const std::string& operands) {
  const bool valid = values.size() == 2 &&
                     std::all_of(values.begin(), values.end(), [](int64_t v) { return v >= 1; });
  if (!valid) {
    throw EngineError(std::string(kConvName) + ": " + what +
                      " must be two positive integers (one per spatial dimension H, W), got " +
                      tuple_to_string(values) + " for " + operands);
  }
}

// convolution.py _conv_general_dilated_shape_rule (conv_shape_tuple) for NHWC/HWIO/NHWC.
ir::AbstractValue conv_abstract_eval(const ir::AbstractValue& lhs, const ir::AbstractValue& rhs,
                                     const ConvParams& p) {
  check_conv_operands(lhs, rhs);
  const std::string operands = operands_of(lhs, rhs);
  check_positive("window_strides", p.window_strides, operands);
  check_positive("lhs_dilation", p.lhs_dilation, operands);
  check_positive("rhs_dilation", p.rhs_dilation, operands);
  if (p.padding.size() != 2) {
    throw EngineError(std::string(kConvName) + ": padding must be two (lo, hi) pairs (H, W), got " +
                      std::to_string(p.padding.size()) + " for " + operands);
  }
  Shape out = {lhs.shape[0], 0, 0, rhs.shape[3]};
  for (size_t d = 0; d < 2; ++d) {
    const WindowDim dim = p.dim(d, lhs.shape[1 + d], rhs.shape[d]);
    if (dilate_dim(dim.size, dim.base_dilation) + dim.padding.first + dim.padding.second < 0) {
      throw EngineError(std::string(kConvName) +
                        ": negative padding is larger than the size of the corresponding "
                        "dimension, got padding (" +
                        std::to_string(dim.padding.first) + ", " +
                        std::to_string(dim.padding.second) + ") for spatial dimension " +
                        std::to_string(d) + " of " + operands);
    }
    out[1 + d] = dim.output_size();
  }
  return {lhs.dtype, out};
}

// --- kernel ---

// `count` elements from `source` into `target` in the compute type.
template <typename Element>
void load_elements(const typename Element::Storage* source, size_t count,
                   typename Element::Compute* target) {
  if constexpr (std::is_same_v<typename Element::Storage, typename Element::Compute>) {
    std::memcpy(target, source, count * sizeof(*target));
  } else {
    for (size_t i = 0; i < count; ++i) target[i] = Element::load(source[i]);
  }
}

// One image's rows of the patch matrix: [H' * W', KH * KW * C], in the compute type. Taps that
// read consecutive input columns (stride-1 windows without kernel dilation) are one contiguous
// run of the image row, copied at once.
template <typename Element>
void fill_patches(const typename Element::Storage* image, const Shape& lhs_shape,
                  const Shape& rhs_shape, const std::vector<int64_t>& taps_h,
                  const std::vector<int64_t>& taps_w, int64_t out_h, int64_t out_w,
                  typename Element::Compute* patches) {
  using Compute = typename Element::Compute;
  const int64_t width = lhs_shape[2], channels = lhs_shape[3];
  const int64_t kernel_h = rhs_shape[0], kernel_w = rhs_shape[1];
  auto* row = patches;
  for (int64_t oh = 0; oh < out_h; ++oh) {
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const int64_t* row_taps = taps_w.data() + ow * kernel_w;
      for (int64_t kh = 0; kh < kernel_h; ++kh) {
        const int64_t ih = taps_h[static_cast<size_t>(oh * kernel_h + kh)];
        if (ih < 0) {
          std::fill(row, row + kernel_w * channels, Compute{0});
          row += kernel_w * channels;
          continue;
        }
        for (int64_t kw = 0; kw < kernel_w;) {
          const int64_t iw = row_taps[kw];
          int64_t run = 1;
          if (iw < 0) {
            std::fill(row, row + channels, Compute{0});
          } else {
            while (kw + run < kernel_w && row_taps[kw + run] == iw + run) ++run;
            load_elements<Element>(image + (ih * width + iw) * channels,
                                   static_cast<size_t>(run * channels), row);
          }
          row += run * channels;
          kw += run;
        }
      }
    }
  }
}

// `count` elements from `data` in the compute type: `data` itself for f32/f64, else converted
// into `scratch`.
template <typename Element>
const typename Element::Compute* as_compute(const typename Element::Storage* data, size_t count,
                                            std::vector<typename Element::Compute>& scratch) {
  if constexpr (std::is_same_v<typename Element::Storage, typename Element::Compute>) {
    return data;
  } else {
    scratch.resize(count);
    for (size_t i = 0; i < count; ++i) scratch[i] = Element::load(data[i]);
    return scratch.data();
  }
}

// Where a kernel sums: the output buffer itself for f32/f64; for bf16/f16 an f32 accumulator
// that finish() rounds into the output once per element.
template <typename Element>
class Accumulator {
 public:
  using Storage = typename Element::Storage;
  using Compute = typename Element::Compute;
  static constexpr bool kInPlace = std::is_same_v<Storage, Compute>;

  explicit Accumulator(Buffer& out) : out_(out.data<Storage>()), num_elements_(out.num_elements()) {
    if constexpr (!kInPlace) sums_.assign(num_elements_, Compute{0});
  }
  Compute* data() {
    if constexpr (kInPlace) {
      return out_;
    } else {
      return sums_.data();
    }
  }
  void finish() {
    if constexpr (!kInPlace) {
      for (size_t i = 0; i < num_elements_; ++i) out_[i] = Element::store(sums_[i]);
    }
  }

 private:
  Storage* out_;
  size_t num_elements_;
  std::vector<Compute> sums_;
};

// How many of `batch` images a chunk holds when each needs `elements_per_image` of scratch.
size_t images_per_chunk(size_t batch, size_t elements_per_image) {
  return std::clamp<size_t>(kPatchChunkElements / std::max<size_t>(elements_per_image, 1), 1,
                            batch);
}

// The im2col formulation: lhs [B, H, W, C], rhs [KH, KW, C, O] -> out [B, H', W', O].
template <typename Element>
void im2col_conv(const Buffer& lhs, const Buffer& rhs, const ConvParams& p, Buffer& out) {
  using Storage = typename Element::Storage;
  using Compute = typename Element::Compute;
  const size_t batch = static_cast<size_t>(lhs.shape[0]);
  const int64_t out_h = out.shape[1], out_w = out.shape[2];
  const size_t rows_per_image = static_cast<size_t>(out_h * out_w);
  const size_t depth = static_cast<size_t>(rhs.shape[0] * rhs.shape[1] * rhs.shape[2]);  // K
  const size_t features = static_cast<size_t>(rhs.shape[3]);                             // O
  const std::vector<int64_t> taps_h = p.dim(0, lhs.shape[1], rhs.shape[0]).taps();
  const std::vector<int64_t> taps_w = p.dim(1, lhs.shape[2], rhs.shape[1]).taps();
  const size_t image_elements = static_cast<size_t>(lhs.shape[1] * lhs.shape[2] * lhs.shape[3]);
  const size_t chunk = images_per_chunk(batch, rows_per_image * depth);
  // The kernel as the matrix [K, O] in the compute type: the buffer itself for f32/f64.
  std::vector<Compute> converted_kernel;
  const Compute* kernel_matrix =
      as_compute<Element>(rhs.data<Storage>(), rhs.num_elements(), converted_kernel);
  // Uninitialised: fill_patches writes every element, the padding's zeros included.
  std::vector<Compute, UninitializedAllocator<Compute>> patches(chunk * rows_per_image * depth);
  std::vector<Compute> product(Accumulator<Element>::kInPlace ? 0
                                                              : chunk * rows_per_image * features);
  const auto* input = lhs.data<Storage>();
  auto* output = out.data<Storage>();
  for (size_t first = 0; first < batch; first += chunk) {
    const size_t images = std::min(chunk, batch - first);
    for (size_t i = 0; i < images; ++i) {
      fill_patches<Element>(input + (first + i) * image_elements, lhs.shape, rhs.shape, taps_h,
                            taps_w, out_h, out_w, patches.data() + i * rows_per_image * depth);
    }
    const size_t rows = images * rows_per_image;
    Storage* chunk_output = output + first * rows_per_image * features;
    if constexpr (Accumulator<Element>::kInPlace) {
      matrix_multiply(kConvName, patches.data(), kernel_matrix, chunk_output, rows, features,
                      depth);
    } else {
      matrix_multiply(kConvName, patches.data(), kernel_matrix, product.data(), rows, features,
                      depth);
      for (size_t i = 0; i < rows * features; ++i) chunk_output[i] = Element::store(product[i]);
    }
  }
}

// --- the scatter (col2im) formulation, for an lhs-dilated input ---
//
// With lhs dilation (d_h, d_w), only one in d_h * d_w positions of the dilated input holds an
// element, so im2col's patch matrix is mostly zeros. This is the input gradient's case:
// _conv_general_dilated_transpose_lhs convolves the cotangent dilated by the forward strides
// (3 zeros in 4 at stride 2, 15 in 16 at stride 4). The scatter formulation walks the
// undilated input instead:
//   columns  [B * H * W, KH * KW * O]: row (b, ih, iw) holds, for each tap (kh, kw) and output
//            feature o, sum_c lhs[b, ih, iw, c] * rhs[kh, kw, c, o]: one gemm of the input
//            rows [B * H * W, C] with the kernel regrouped as [C, KH * KW * O] (for the input
//            gradient: cotangent x kernel^T, the kernel being flipped with C and O swapped);
//   target   the output position input row ih reaches through tap kh: the oh with
//            oh * stride + kh * rhs_dilation - lo == ih * lhs_dilation, when that is a whole
//            number in [0, H'), else none (WindowDim::targets(), the inverse of taps()).
// col2im adds each column block [O] into its target position. im2col and col2im form the same
// products of input and kernel elements (col2im skips only the zeros), so the sums are equal
// up to their order.

// One image's col2im: columns [H * W, KH * KW * O] added into image_out [H', W', O].
template <typename Compute>
void col2im(const Compute* columns, const Shape& lhs_shape, const Shape& rhs_shape,
            const std::vector<int64_t>& targets_h, const std::vector<int64_t>& targets_w,
            int64_t out_w, Compute* image_out) {
  const int64_t height = lhs_shape[1], width = lhs_shape[2];
  const int64_t kernel_h = rhs_shape[0], kernel_w = rhs_shape[1], features = rhs_shape[3];
  const int64_t column_width = kernel_h * kernel_w * features;
  for (int64_t ih = 0; ih < height; ++ih) {
    for (int64_t iw = 0; iw < width; ++iw) {
      const Compute* column = columns + (ih * width + iw) * column_width;
      for (int64_t kh = 0; kh < kernel_h; ++kh) {
        const int64_t oh = targets_h[static_cast<size_t>(ih * kernel_h + kh)];
        if (oh < 0) continue;
        for (int64_t kw = 0; kw < kernel_w; ++kw) {
          const int64_t ow = targets_w[static_cast<size_t>(iw * kernel_w + kw)];
          if (ow < 0) continue;
          const Compute* block = column + (kh * kernel_w + kw) * features;
          Compute* target = image_out + (oh * out_w + ow) * features;
          for (int64_t o = 0; o < features; ++o) target[o] += block[o];
        }
      }
    }
  }
}

// lhs [B, H, W, C] (lhs-dilated by p), rhs [KH, KW, C, O] -> out [B, H', W', O].
template <typename Element>
void scatter_conv(const Buffer& lhs, const Buffer& rhs, const ConvParams& p, Buffer& out) {
  using Storage = typename Element::Storage;
  using Compute = typename Element::Compute;
  const size_t batch = static_cast<size_t>(lhs.shape[0]);
  const size_t rows_per_image = static_cast<size_t>(lhs.shape[1] * lhs.shape[2]);  // H * W
  const size_t channels = static_cast<size_t>(lhs.shape[3]);                       // C
  const size_t taps = static_cast<size_t>(rhs.shape[0] * rhs.shape[1]);            // KH * KW
  const size_t features = static_cast<size_t>(rhs.shape[3]);                       // O
  const size_t column_width = taps * features;
  const size_t out_image_elements = static_cast<size_t>(out.shape[1] * out.shape[2]) * features;
  const std::vector<int64_t> targets_h = p.dim(0, lhs.shape[1], rhs.shape[0]).targets();
  const std::vector<int64_t> targets_w = p.dim(1, lhs.shape[2], rhs.shape[1]).targets();
  // rhs [KH * KW, C, O] regrouped as [C, KH * KW * O].
  std::vector<Compute> regrouped(channels * column_width);
  const Storage* kernel = rhs.data<Storage>();
  for (size_t tap = 0; tap < taps; ++tap) {
    for (size_t c = 0; c < channels; ++c) {
      for (size_t o = 0; o < features; ++o) {
        regrouped[c * column_width + tap * features + o] =
            Element::load(kernel[(tap * channels + c) * features + o]);
      }
    }
  }
  const size_t chunk = images_per_chunk(batch, rows_per_image * column_width);
  std::vector<Compute> columns(chunk * rows_per_image * column_width);
  std::vector<Compute> converted_input;
  Accumulator<Element> sums(out);
  const auto* input = lhs.data<Storage>();
  for (size_t first = 0; first < batch; first += chunk) {
    const size_t images = std::min(chunk, batch - first);
    const size_t rows = images * rows_per_image;
    const Compute* input_rows = as_compute<Element>(input + first * rows_per_image * channels,
                                                    rows * channels, converted_input);
    matrix_multiply(kConvName, input_rows, regrouped.data(), columns.data(), rows, column_width,
                    channels);
    for (size_t i = 0; i < images; ++i) {
      col2im(columns.data() + i * rows_per_image * column_width, lhs.shape, rhs.shape, targets_h,
             targets_w, out.shape[2], sums.data() + (first + i) * out_image_elements);
    }
  }
  sums.finish();
}

// A kernel's output of `type`, OpenBLAS set up for the gemms that compute it; zero-filled where
// the kernel adds into it.
Buffer kernel_output(const ir::AbstractValue& type, bool zero_filled) {
  use_single_threaded_blas();
  return zero_filled ? Buffer::allocate(type.dtype, type.shape)
                     : Buffer::allocate_uninitialized(type.dtype, type.shape);
}

// Whether a kernel's sums are all empty: an output, lhs or rhs without elements (the
// zero-filled output is then the answer).
bool has_no_products(const Buffer& out, const Buffer& lhs, const Buffer& rhs) {
  return out.num_elements() == 0 || lhs.num_elements() == 0 || rhs.num_elements() == 0;
}

bool is_lhs_dilated(const ConvParams& p) {
  return std::any_of(p.lhs_dilation.begin(), p.lhs_dilation.end(), [](int64_t d) { return d > 1; });
}

// --- which implementation runs ---
//
// f32, bf16 and f16 run on oneDNN's convolution primitives (ops/onednn_conv.h; bf16 and f16
// converted to f32 on the way in and rounded once per element on the way out, as the gemm
// kernels do) wherever oneDNN can express the conv; f64 (oneDNN has no f64), negative padding
// and the shapes below run on the im2col/scatter kernels above, which are also the reference
// implementation that PE_CONV=im2col selects for every conv (docs/engine.md).

bool reference_requested() {
  const char* choice = std::getenv("PE_CONV");
  if (choice == nullptr || std::string(choice) == "onednn") return false;
  if (std::string(choice) == "im2col") return true;
  throw EngineError(std::string("PE_CONV must be im2col or onednn, got '") + choice + "'");
}

bool runs_on_onednn(DType dtype) { return dtype != DType::f64 && !reference_requested(); }

// A forward conv (no lhs dilation) as oneDNN's geometry, or none where padding is negative.
std::optional<OneDnnConvGeometry> forward_geometry(const Shape& lhs, const Shape& rhs,
                                                   const Shape& out, const ConvParams& p) {
  if (is_lhs_dilated(p)) return std::nullopt;
  OneDnnConvGeometry g{lhs, rhs, out, {}, {}, {}, {}};
  for (size_t d = 0; d < 2; ++d) {
    const auto [lo, hi] = p.padding[d];
    if (lo < 0 || hi < 0) return std::nullopt;
    g.strides[d] = p.window_strides[d];
    g.dilation[d] = p.rhs_dilation[d];
    g.padding_lo[d] = lo;
    g.padding_hi[d] = hi;
  }
  return g;
}

// An lhs-dilated conv, the input's cotangent that conv_transpose_lhs binds, as the backward
// data pass of the forward conv it came from: lhs g [B, H', W', O], rhs the flipped kernel
// [KH, KW, O, C], out [B, H, W, C]. That conv reads the cotangent dilated by the forward
// strides s (its lhs_dilation), so out[i] = sum over taps k and positions j with
// j * s == i + k * d - lo of g[j] * rhs[k]; with the forward tap k' = KH - 1 - k this is
// i = j * s + k' * d - ((KH - 1) * d - lo): the backward data pass of the conv with strides s,
// kernel dilation d, padding lo' = (KH - 1) * d - lo (and hi' likewise), and kernel
// w[k', c, o] = rhs[KH - 1 - k', o, c]. With those paddings oneDNN's output extent
// ((H + lo' + hi' - (KH - 1) * d - 1) / s + 1) is H' exactly.
// None where oneDNN cannot express it: a window stride (the forward's lhs dilation) above 1, a
// negative lo' or hi'; nor for 1x1 kernels with a stride above 1, whose backward data kernel
// (jit_1x1 on AVX2, oneDNN 2.6.3) writes out of bounds on channels-last tensors
// (docs/engine.md); the scatter kernel computes those. The identity holds for s = 1 too, so a
// conv without lhs dilation whose negative padding the forward primitive cannot take (oneDNN
// does not crop) runs this way when lo' and hi' are non-negative.
std::optional<OneDnnConvGeometry> backward_data_geometry(const Shape& lhs, const Shape& rhs,
                                                         const Shape& out, const ConvParams& p) {
  const bool one_by_one = rhs[0] == 1 && rhs[1] == 1;
  OneDnnConvGeometry g{out, {rhs[0], rhs[1], rhs[3], rhs[2]}, lhs, {}, {}, {}, {}};
  for (size_t d = 0; d < 2; ++d) {
    const int64_t span = (rhs[d] - 1) * p.rhs_dilation[d];
    const int64_t lo = span - p.padding[d].first, hi = span - p.padding[d].second;
    if (p.window_strides[d] != 1 || lo < 0 || hi < 0) return std::nullopt;
    if (one_by_one && p.lhs_dilation[d] > 1) return std::nullopt;
    g.strides[d] = p.lhs_dilation[d];
    g.dilation[d] = p.rhs_dilation[d];
    g.padding_lo[d] = lo;
    g.padding_hi[d] = hi;
  }
  return g;
}

// `data` in f32: itself for f32, else converted into `scratch`.
template <typename Element>
const float* f32_data(const Buffer& buffer, std::vector<float>& scratch) {
  return as_compute<Element>(buffer.data<typename Element::Storage>(), buffer.num_elements(),
                             scratch);
}

// The flipped, feature-swapped kernel [KH, KW, O, C] of an lhs-dilated conv as its forward
// conv's HWIO kernel [KH, KW, C, O], in f32 (backward_data_geometry).
template <typename Element>
std::vector<float> forward_kernel_of(const Buffer& rhs) {
  const int64_t kernel_h = rhs.shape[0], kernel_w = rhs.shape[1];
  const int64_t in = rhs.shape[2], out = rhs.shape[3];  // O, C of the forward
  const auto* flipped = rhs.data<typename Element::Storage>();
  std::vector<float> kernel(rhs.num_elements());
  for (int64_t kh = 0; kh < kernel_h; ++kh) {
    for (int64_t kw = 0; kw < kernel_w; ++kw) {
      const auto* source = flipped + ((kernel_h - 1 - kh) * kernel_w + (kernel_w - 1 - kw)) * in * out;
      float* target = kernel.data() + (kh * kernel_w + kw) * out * in;
      for (int64_t o = 0; o < in; ++o) {
        for (int64_t c = 0; c < out; ++c) target[c * in + o] = Element::load(source[o * out + c]);
      }
    }
  }
  return kernel;
}

// oneDNN's forward pass where it takes the conv, else its backward data pass where that
// expresses it (backward_data_geometry); elsewhere an lhs-dilated input goes through the
// scatter formulation, any other through im2col.
Buffer conv_kernel(const Buffer& lhs, const Buffer& rhs, const ConvParams& p) {
  const ir::AbstractValue type =
      conv_abstract_eval({lhs.dtype, lhs.shape}, {rhs.dtype, rhs.shape}, p);
  const bool onednn = runs_on_onednn(lhs.dtype);
  const std::optional<OneDnnConvGeometry> forward =
      onednn ? forward_geometry(lhs.shape, rhs.shape, type.shape, p) : std::nullopt;
  const std::optional<OneDnnConvGeometry> backward_data =
      onednn && !forward ? backward_data_geometry(lhs.shape, rhs.shape, type.shape, p)
                         : std::nullopt;
  // im2col's gemm and oneDNN write every output element; the scatter kernel adds into them.
  const bool scatter = is_lhs_dilated(p) && !backward_data;
  Buffer out = kernel_output(type, scatter || lhs.num_elements() == 0 || rhs.num_elements() == 0);
  if (has_no_products(out, lhs, rhs)) return out;
  dispatch_float(lhs.dtype, [&](auto element) {
    using Element = decltype(element);
    if constexpr (std::is_same_v<typename Element::Compute, float>) {
      if (forward || backward_data) {
        std::vector<float> lhs_f32, rhs_f32;
        const float* lhs_data = f32_data<Element>(lhs, lhs_f32);
        Accumulator<Element> result(out);
        if (forward) {
          onednn_conv_forward(*forward, lhs_data, f32_data<Element>(rhs, rhs_f32), result.data());
        } else {
          rhs_f32 = forward_kernel_of<Element>(rhs);
          onednn_conv_backward_data(*backward_data, lhs_data, rhs_f32.data(), result.data());
        }
        result.finish();
        return;
      }
    }
    if (scatter) {
      scatter_conv<Element>(lhs, rhs, p, out);
    } else {
      im2col_conv<Element>(lhs, rhs, p, out);
    }
  });
  return out;
}

// --- the kernel's cotangent (conv_general_dilated_transpose_rhs) ---
//
// rhs_ct[kh, kw, c, o] = sum over (b, h', w') of patches[(b, h', w'), (kh, kw, c)] *
// g[(b, h', w'), o], where patches is the forward's im2col of lhs (fill_patches, same
// geometry): rhs_ct = patches^T @ g, [KH * KW * C, O], which is HWIO itself. One gemm per chunk
// of images, each adding its images' share (feature_group_count is 1: one group).
// lhs [B, H, W, C], g [B, H', W', O] -> rhs_ct [KH, KW, C, O]
template <typename Element>
void transpose_rhs_kernel(const Buffer& lhs, const Buffer& g, const ConvParams& p, Buffer& rhs_ct) {
  using Storage = typename Element::Storage;
  using Compute = typename Element::Compute;
  const Shape& rhs_shape = rhs_ct.shape;
  const size_t batch = static_cast<size_t>(lhs.shape[0]);
  const int64_t out_h = g.shape[1], out_w = g.shape[2];
  const size_t rows_per_image = static_cast<size_t>(out_h * out_w);
  const size_t depth = static_cast<size_t>(rhs_shape[0] * rhs_shape[1] * rhs_shape[2]);  // K
  const size_t features = static_cast<size_t>(rhs_shape[3]);                             // O
  const std::vector<int64_t> taps_h = p.dim(0, lhs.shape[1], rhs_shape[0]).taps();
  const std::vector<int64_t> taps_w = p.dim(1, lhs.shape[2], rhs_shape[1]).taps();
  const size_t image_elements = static_cast<size_t>(lhs.shape[1] * lhs.shape[2] * lhs.shape[3]);
  const size_t chunk = images_per_chunk(batch, rows_per_image * depth);
  // Uninitialised: fill_patches writes every element, the padding's zeros included.
  std::vector<Compute, UninitializedAllocator<Compute>> patches(chunk * rows_per_image * depth);
  std::vector<Compute> converted_g;
  Accumulator<Element> sums(rhs_ct);
  const auto* input = lhs.data<Storage>();
  const auto* cotangent = g.data<Storage>();
  for (size_t first = 0; first < batch; first += chunk) {
    const size_t images = std::min(chunk, batch - first);
    for (size_t i = 0; i < images; ++i) {
      fill_patches<Element>(input + (first + i) * image_elements, lhs.shape, rhs_shape, taps_h,
                            taps_w, out_h, out_w, patches.data() + i * rows_per_image * depth);
    }
    const size_t rows = images * rows_per_image;
    const Compute* g_rows = as_compute<Element>(cotangent + first * rows_per_image * features,
                                                rows * features, converted_g);
    accumulate_transposed_product(kConvTransposeRhsName, patches.data(), g_rows, sums.data(), depth,
                                  features, rows);
  }
  sums.finish();
}

// --- rev[dimensions] (lax.rev): reverses the order of elements along `dimensions` ---

ir::AbstractValue rev_abstract_eval(const ir::AbstractValue& x,
                                    const std::vector<int64_t>& dimensions) {
  for (int64_t d : dimensions) {
    if (d < 0 || d >= static_cast<int64_t>(x.shape.size())) {
      throw EngineError("rev: dimensions " + tuple_to_string(dimensions) +
                        " must be axes of the operand " + type_of(x));
    }
  }
  return x;
}

// Reads x with negated strides along the reversed dimensions, starting from their last index.
Buffer rev_kernel(const Buffer& x, const std::vector<int64_t>& dimensions) {
  Buffer out = Buffer::allocate(x.dtype, x.shape);
  if (x.num_elements() == 0) return out;
  std::vector<int64_t> strides = row_major_strides(x.shape);
  int64_t start = 0;
  for (int64_t d : dimensions) {
    const size_t axis = static_cast<size_t>(d);
    start += (x.shape[axis] - 1) * strides[axis];
    strides[axis] = -strides[axis];
  }
  dispatch_width(x.dtype, [&](auto width) {
    using Storage = typename decltype(width)::Storage;
    const Storage* source = x.data<Storage>() + start;
    Storage* destination = out.data<Storage>();
    for_each_strided<1>(x.shape, {strides},
                        [&](size_t index, const std::array<int64_t, 1>& offset) {
                          destination[index] = source[offset[0]];
                        });
  });
  return out;
}

const ir::Primitive* kRev = ir::register_primitive({
    "rev",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{
          rev_abstract_eval(inputs.at(0), params.ints("dimensions"))};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{rev_kernel(*inputs[0], params.ints("dimensions"))};
    },
    // rev is linear and its own transpose (lax.py: ad.deflinear2(rev_p, ... rev(t, dimensions))).
    // ct [...] -> x [...]
    [](const ir::VjpArgs& args) {
      return std::vector<Array>{ir::bind1(*kRev, {args.output_cotangents[0]},
                                          {{"dimensions", args.params.ints("dimensions")}})};
    },
});

// --- VJP ---

std::vector<int64_t> spatial(const Array& x, size_t first) {
  return {x.shape()[first], x.shape()[first + 1]};
}

// The public op on explicit params, so that the backward convs trace like the forward one.
Array conv_with(const Array& lhs, const Array& rhs, const ConvParams& p) {
  return conv_general_dilated(lhs, rhs, p.window_strides, Padding(p.padding), p.lhs_dilation,
                              p.rhs_dilation);
}

// convolution.py _conv_general_dilated_transpose_lhs: the input's cotangent is the conv of the
// cotangent with the spatially flipped kernel whose in- and out-features are swapped (HWOI read
// as HWIO), strided by lhs_dilation, lhs-dilated by the forward strides (the cotangent's
// positions spread back to the stride they were taken at), padded by
// _conv_general_vjp_lhs_padding.
// g [B, H', W', O], rhs [KH, KW, C, O] -> [B, H, W, C]
Array conv_transpose_lhs(const Array& g, const Array& lhs, const Array& rhs, const ConvParams& p) {
  const Array flipped = ir::bind1(*kRev, {rhs}, {{"dimensions", std::vector<int64_t>{0, 1}}});
  const Array kernel = transpose(flipped, {0, 1, 3, 2});  // [KH, KW, O, C]
  const ConvParams t{
      p.lhs_dilation,
      conv_general_vjp_lhs_padding(spatial(lhs, 1), spatial(rhs, 0), p.window_strides,
                                   spatial(g, 1), p.padding, p.lhs_dilation, p.rhs_dilation),
      p.window_strides, p.rhs_dilation};
  return conv_with(g, kernel, t);
}

// conv_general_dilated_transpose_rhs[window_strides, padding, lhs_dilation, rhs_dilation,
// rhs_shape]: the forward conv's params and its kernel's shape.
// lhs [B, H, W, C], g [B, H', W', O] -> [KH, KW, C, O]
ir::AbstractValue transpose_rhs_abstract_eval(const ir::AbstractValue& lhs,
                                              const ir::AbstractValue& g,
                                              const ir::Params& params) {
  const ir::AbstractValue rhs{lhs.dtype, params.ints("rhs_shape")};
  const ir::AbstractValue out = conv_abstract_eval(lhs, rhs, ConvParams::from(params));
  if (g.dtype != lhs.dtype || g.shape != out.shape) {
    throw EngineError(std::string(kConvTransposeRhsName) + ": the cotangent must be the conv's " +
                      type_of(out) + " for lhs " + type_of(lhs) + " and rhs " + type_of(rhs) +
                      ", got " + type_of(g));
  }
  return rhs;
}

// Linear in each operand: with rhs_ct's cotangent ct, <ct, transpose_rhs(lhs, g)> =
// <conv(lhs, ct), g>, so lhs gets conv_transpose_lhs(g, ct) and g gets conv(lhs, ct).
std::vector<Array> transpose_rhs_vjp(const ir::VjpArgs& args) {
  const Array& lhs = args.inputs[0];
  const Array& g = args.inputs[1];
  const Array& ct = args.output_cotangents[0];  // [KH, KW, C, O]
  const ConvParams p = ConvParams::from(args.params);
  return {args.needs(0) ? conv_transpose_lhs(g, lhs, ct, p) : Array(),
          args.needs(1) ? conv_with(lhs, ct, p) : Array()};
}

// On oneDNN's backward weights pass where it runs the forward conv, else patches^T @ g.
Buffer transpose_rhs_buffer(const Buffer& lhs, const Buffer& g, const ir::Params& params) {
  const ir::AbstractValue type =
      transpose_rhs_abstract_eval({lhs.dtype, lhs.shape}, {g.dtype, g.shape}, params);
  const ConvParams p = ConvParams::from(params);
  const std::optional<OneDnnConvGeometry> geometry =
      runs_on_onednn(lhs.dtype) ? forward_geometry(lhs.shape, type.shape, g.shape, p)
                                : std::nullopt;
  // oneDNN writes every element; the gemms add into a zero-filled output.
  Buffer rhs_ct = kernel_output(type, !geometry || lhs.num_elements() == 0 || g.num_elements() == 0);
  if (has_no_products(rhs_ct, lhs, g)) return rhs_ct;
  dispatch_float(lhs.dtype, [&](auto element) {
    using Element = decltype(element);
    if constexpr (std::is_same_v<typename Element::Compute, float>) {
      if (geometry) {
        std::vector<float> lhs_f32, g_f32;
        Accumulator<Element> result(rhs_ct);
        onednn_conv_backward_weights(*geometry, f32_data<Element>(lhs, lhs_f32),
                                     f32_data<Element>(g, g_f32), result.data());
        result.finish();
        return;
      }
    }
    transpose_rhs_kernel<Element>(lhs, g, p, rhs_ct);
  });
  return rhs_ct;
}

const ir::Primitive* kConvTransposeRhs = ir::register_primitive({
    kConvTransposeRhsName,
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{
          transpose_rhs_abstract_eval(inputs.at(0), inputs.at(1), params)};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{transpose_rhs_buffer(*inputs[0], *inputs[1], params)};
    },
    transpose_rhs_vjp,
});

// convolution.py _conv_general_dilated_transpose_rhs: the kernel's cotangent is the conv of the
// input with the cotangent, the batch dimension contracted. JAX writes it as a
// conv_general_dilated with batch and feature swapped in the dimension numbers (lhs "CHWN", the
// cotangent as kernel "HWNO", output "CHWO"), strided by rhs_dilation, lhs-dilated as the
// forward, rhs-dilated by the forward strides, padded by _conv_general_vjp_rhs_padding. The
// NHWC-only conv primitive cannot take those dimension numbers (it would need three
// transposes), so the engine binds the rule as one primitive with the forward's params and the
// kernel's shape; its kernel (transpose_rhs_kernel) computes the same sums as im2col(lhs)^T @ g.
// lhs [B, H, W, C], g [B, H', W', O] -> [KH, KW, C, O]
Array conv_transpose_rhs(const Array& g, const Array& lhs, const Shape& rhs_shape,
                         const ConvParams& p) {
  return ir::bind1(*kConvTransposeRhs, {lhs, g}, p.params().set("rhs_shape", rhs_shape));
}

std::vector<Array> conv_vjp(const ir::VjpArgs& args) {
  const Array& lhs = args.inputs[0];
  const Array& rhs = args.inputs[1];
  const Array& g = args.output_cotangents[0];
  const ConvParams p = ConvParams::from(args.params);
  // A layer's input needs no cotangent when it is the data (the first conv of a network).
  return {args.needs(0) ? conv_transpose_lhs(g, lhs, rhs, p) : Array(),
          args.needs(1) ? conv_transpose_rhs(g, lhs, rhs.shape(), p) : Array()};
}

const ir::Primitive* kConv = ir::register_primitive({
    kConvName,
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{
          conv_abstract_eval(inputs.at(0), inputs.at(1), ConvParams::from(params))};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{conv_kernel(*inputs[0], *inputs[1], ConvParams::from(params))};
    },
    conv_vjp,
});

std::vector<int64_t> ones_if_empty(const std::vector<int64_t>& dilation) {
  return dilation.empty() ? std::vector<int64_t>{1, 1} : dilation;
}

}  // namespace

Array conv_general_dilated(const Array& lhs, const Array& rhs,
                           const std::vector<int64_t>& window_strides, const Padding& padding,
                           const std::vector<int64_t>& lhs_dilation,
                           const std::vector<int64_t>& rhs_dilation, int64_t feature_group_count) {
  check_valid_operand(kConvName, lhs);
  check_valid_operand(kConvName, rhs);
  const ir::AbstractValue lhs_type{lhs.dtype(), lhs.shape()};
  const ir::AbstractValue rhs_type{rhs.dtype(), rhs.shape()};
  if (feature_group_count != 1) {
    throw EngineError(std::string(kConvName) +
                      ": feature_group_count=" + std::to_string(feature_group_count) +
                      " is not supported, only 1 (grouped and depthwise convolutions are not "
                      "implemented), for " +
                      operands_of(lhs_type, rhs_type));
  }
  check_conv_operands(lhs_type, rhs_type);
  ConvParams p{window_strides, {}, ones_if_empty(lhs_dilation), ones_if_empty(rhs_dilation)};
  check_positive("window_strides", p.window_strides, operands_of(lhs_type, rhs_type));
  check_positive("rhs_dilation", p.rhs_dilation, operands_of(lhs_type, rhs_type));
  // lax.conv_general_dilated resolves a padding name against the undilated input and the
  // dilated kernel.
  p.padding = resolve_padding(kConvName, padding, spatial(lhs, 1),
                              {dilate_dim(rhs.shape()[0], p.rhs_dilation[0]),
                               dilate_dim(rhs.shape()[1], p.rhs_dilation[1])},
                              p.window_strides);
  return ir::bind1(*kConv, {lhs, rhs}, p.params());
}

}  // namespace pmap_engine
