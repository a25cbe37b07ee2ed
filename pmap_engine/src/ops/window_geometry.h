// Window arithmetic shared by conv_general_dilated (conv.cpp) and the windowed reductions
// (windowed_reductions.cpp), per spatial dimension, as lax defines it (jax-ml/jax commit
// cec06d1, jax/_src/lax/lax.py _dilate_shape, jax/_src/core.py stride_dim,
// jax/_src/lax/convolution.py _conv_general_vjp_lhs_padding).
//
// Vocabulary, for one dimension of size `size`:
//   base (lhs) dilation  d - 1 holes between neighbouring input elements: the input is read as
//                        if it had (size - 1) * d + 1 elements, the holes being zeros (padding);
//   window (rhs) dilation  the same for the window's taps: a window of `window` taps spans
//                        (window - 1) * d + 1 positions;
//   padding (lo, hi)     positions added before and after the dilated input (negative: cropped);
//   stride               how far apart consecutive windows start.
// The output has stride_dim(dilated size + lo + hi, dilated window, stride) elements.
#pragma once

#include <cstdint>
#include <vector>

#include "pmap_engine/ops.h"

namespace pmap_engine {

// lax._dilate_shape for one dimension: 0 stays 0, else 1 + dilation * (size - 1).
int64_t dilate_dim(int64_t size, int64_t dilation);

// core.stride_dim: how many windows of `window` positions fit in `size` at `stride`, or 0.
int64_t stride_dim(int64_t size, int64_t window, int64_t stride);

struct WindowDim {
  int64_t size = 1;    // the input's extent
  int64_t window = 1;  // taps
  int64_t stride = 1;
  PadPair padding = {0, 0};
  int64_t base_dilation = 1;
  int64_t window_dilation = 1;

  int64_t output_size() const;
  // taps()[out * window + tap]: the input index that window `out`'s tap `tap` reads, or -1
  // where it reads padding or a dilation hole.
  std::vector<int64_t> taps() const;
  // targets()[in * window + tap]: the output index whose window reads input index `in` through
  // tap `tap`, or -1 where none does (the inverse of taps(): a pair reaches at most one output,
  // the one with out * stride + tap * window_dilation - lo == in * base_dilation).
  std::vector<int64_t> targets() const;
};

// Padding as a primitive's params store it, flat (lo0, hi0, lo1, hi1, ...), back in pairs.
std::vector<PadPair> pad_pairs_from_flat(const std::vector<int64_t>& flat);

// `padding` as explicit pairs, one per entry of in_shape: a name goes through padtype_to_pads;
// pairs are checked to be as many as the dimensions (raising naming `op`).
std::vector<PadPair> resolve_padding(const char* op, const Padding& padding,
                                     const std::vector<int64_t>& in_shape,
                                     const std::vector<int64_t>& window_shape,
                                     const std::vector<int64_t>& window_strides);

// The padding of the cotangent conv that gives the input's cotangent, per spatial dimension
// (convolution.py _conv_general_vjp_lhs_padding; reduce_window_sum's transpose uses it too).
std::vector<PadPair> conv_general_vjp_lhs_padding(const std::vector<int64_t>& in_shape,
                                                  const std::vector<int64_t>& window_dimensions,
                                                  const std::vector<int64_t>& window_strides,
                                                  const std::vector<int64_t>& out_shape,
                                                  const std::vector<PadPair>& padding,
                                                  const std::vector<int64_t>& lhs_dilation,
                                                  const std::vector<int64_t>& rhs_dilation);

}  // namespace pmap_engine
