// conv_general_dilated (lax.conv_general_dilated) for flax.linen.Conv's layout, its VJP, and the
// lax.rev primitive the VJP flips the kernel with. Source modelled: jax-ml/jax commit cec06d1,
// jax/_src/lax/convolution.py.
//
// Layout (dimension_numbers ("NHWC", "HWIO", "NHWC"), the only one supported):
//   lhs [B, H, W, C], rhs [KH, KW, C, O] -> out [B, H', W', O],
//   H' = stride_dim(dilate(H, lhs_dilation) + lo + hi, dilate(KH, rhs_dilation), stride)
// (ops/window_geometry.h). Params: window_strides (sh, sw), padding (lo_h, hi_h, lo_w, hi_w),
// lhs_dilation, rhs_dilation. Padding may be negative (the kernel's VJP needs that).
//
// Kernel: im2col + one gemm per chunk of images. Each output position (b, h', w') becomes a
// row of the patch matrix holding its window's inputs in (kh, kw, c) order, zeros for padding
// and dilation holes: patches [B * H' * W', KH * KW * C]. The HWIO kernel is already the
// row-major matrix [KH * KW * C, O], so patches @ kernel is [B * H' * W', O], the NHWC output
// itself. The gemm is ops/blas.h's (single-threaded OpenBLAS, as dot_general): f32 sgemm,
// f64 dgemm, bf16/f16 converted to f32 on the way into the patches, sgemm, and rounded to
// nearest even once per output element (as dot_general does).
#include <algorithm>
#include <array>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/primitive.h"
#include "ops/blas.h"
#include "ops/broadcasting.h"
#include "ops/kernel_util.h"
#include "ops/window_geometry.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

constexpr const char* kConvName = "conv_general_dilated";

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

// One image's rows of the patch matrix: [H' * W', KH * KW * C], in the compute type.
template <typename Element>
void fill_patches(const typename Element::Storage* image, const Shape& lhs_shape,
                  const Shape& rhs_shape, const std::vector<int64_t>& taps_h,
                  const std::vector<int64_t>& taps_w, int64_t out_h, int64_t out_w,
                  typename Element::Compute* patches) {
  const int64_t width = lhs_shape[2], channels = lhs_shape[3];
  const int64_t kernel_h = rhs_shape[0], kernel_w = rhs_shape[1];
  auto* row = patches;
  for (int64_t oh = 0; oh < out_h; ++oh) {
    for (int64_t ow = 0; ow < out_w; ++ow) {
      for (int64_t kh = 0; kh < kernel_h; ++kh) {
        const int64_t ih = taps_h[static_cast<size_t>(oh * kernel_h + kh)];
        for (int64_t kw = 0; kw < kernel_w; ++kw, row += channels) {
          const int64_t iw = taps_w[static_cast<size_t>(ow * kernel_w + kw)];
          if (ih < 0 || iw < 0) {
            std::fill(row, row + channels, typename Element::Compute{0});
            continue;
          }
          const auto* source = image + (ih * width + iw) * channels;
          for (int64_t c = 0; c < channels; ++c) row[c] = Element::load(source[c]);
        }
      }
    }
  }
}

Buffer conv_kernel(const Buffer& lhs, const Buffer& rhs, const ConvParams& p) {
  use_single_threaded_blas();
  const ir::AbstractValue out_type =
      conv_abstract_eval({lhs.dtype, lhs.shape}, {rhs.dtype, rhs.shape}, p);
  Buffer out = Buffer::allocate(out_type.dtype, out_type.shape);  // zero-filled
  const size_t batch = static_cast<size_t>(lhs.shape[0]);
  const int64_t out_h = out_type.shape[1], out_w = out_type.shape[2];
  const size_t rows_per_image = static_cast<size_t>(out_h * out_w);
  const size_t depth = static_cast<size_t>(rhs.shape[0] * rhs.shape[1] * rhs.shape[2]);  // K
  const size_t features = static_cast<size_t>(rhs.shape[3]);                             // O
  if (batch == 0 || rows_per_image == 0 || features == 0 || depth == 0) return out;  // empty sum
  const std::vector<int64_t> taps_h = p.dim(0, lhs.shape[1], rhs.shape[0]).taps();
  const std::vector<int64_t> taps_w = p.dim(1, lhs.shape[2], rhs.shape[1]).taps();
  const size_t image_elements = static_cast<size_t>(lhs.shape[1] * lhs.shape[2] * lhs.shape[3]);
  const size_t images_per_chunk =
      std::clamp<size_t>(kPatchChunkElements / (rows_per_image * depth), 1, batch);

  dispatch_float(lhs.dtype, [&](auto element) {
    using Element = decltype(element);
    using Storage = typename Element::Storage;
    using Compute = typename Element::Compute;
    constexpr bool kComputesInStorage = std::is_same_v<Storage, Compute>;
    // The kernel as the matrix [K, O] in the compute type: the buffer itself for f32/f64.
    std::vector<Compute> converted_kernel;
    const Compute* kernel_matrix = nullptr;
    if constexpr (kComputesInStorage) {
      kernel_matrix = rhs.data<Storage>();
    } else {
      converted_kernel.resize(rhs.num_elements());
      const auto* source = rhs.data<Storage>();
      for (size_t i = 0; i < converted_kernel.size(); ++i) {
        converted_kernel[i] = Element::load(source[i]);
      }
      kernel_matrix = converted_kernel.data();
    }
    std::vector<Compute> patches(images_per_chunk * rows_per_image * depth);
    std::vector<Compute> product(kComputesInStorage ? 0
                                                    : images_per_chunk * rows_per_image * features);
    const auto* input = lhs.data<Storage>();
    auto* output = out.data<Storage>();
    for (size_t first = 0; first < batch; first += images_per_chunk) {
      const size_t images = std::min(images_per_chunk, batch - first);
      for (size_t i = 0; i < images; ++i) {
        fill_patches<Element>(input + (first + i) * image_elements, lhs.shape, rhs.shape, taps_h,
                              taps_w, out_h, out_w, patches.data() + i * rows_per_image * depth);
      }
      const size_t rows = images * rows_per_image;
      Compute* destination = nullptr;
      if constexpr (kComputesInStorage) {
        destination = output + first * rows_per_image * features;
      } else {
        destination = product.data();
      }
      matrix_multiply(kConvName, patches.data(), kernel_matrix, destination, rows, features, depth);
      if constexpr (!kComputesInStorage) {
        Storage* chunk_output = output + first * rows_per_image * features;
        for (size_t i = 0; i < rows * features; ++i) chunk_output[i] = Element::store(product[i]);
      }
    }
  });
  return out;
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

// convolution.py _conv_general_dilated_transpose_rhs: the kernel's cotangent is the conv of the
// input with the cotangent, the batch dimension contracted: JAX swaps batch and feature in the
// dimension numbers (lhs "CHWN", the cotangent as kernel "HWNO", output "CHWO"); with the
// NHWC-only primitive that is three transposes. Strided by rhs_dilation, lhs-dilated as the
// forward, rhs-dilated by the forward strides, padded by _conv_general_vjp_rhs_padding.
// lhs [B, H, W, C], g [B, H', W', O] -> [KH, KW, C, O]
Array conv_transpose_rhs(const Array& g, const Array& lhs, const Array& rhs, const ConvParams& p) {
  const Array features_as_batch = transpose(lhs, {3, 1, 2, 0});  // [C, H, W, B]
  const Array g_as_kernel = transpose(g, {1, 2, 0, 3});          // [H', W', B, O]
  // The conv gives [C, KH, KW, O]; the transpose at the end makes it HWIO.
  const ConvParams t{
      p.rhs_dilation,
      conv_general_vjp_rhs_padding(spatial(lhs, 1), spatial(rhs, 0), p.window_strides,
                                   spatial(g, 1), p.padding, p.lhs_dilation, p.rhs_dilation),
      p.lhs_dilation, p.window_strides};
  return transpose(conv_with(features_as_batch, g_as_kernel, t), {1, 2, 0, 3});
}

std::vector<Array> conv_vjp(const ir::VjpArgs& args) {
  const Array& lhs = args.inputs[0];
  const Array& rhs = args.inputs[1];
  const Array& g = args.output_cotangents[0];
  const ConvParams p = ConvParams::from(args.params);
  // A layer's input needs no cotangent when it is the data (the first conv of a network).
  return {args.needs(0) ? conv_transpose_lhs(g, lhs, rhs, p) : Array(),
          args.needs(1) ? conv_transpose_rhs(g, lhs, rhs, p) : Array()};
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
