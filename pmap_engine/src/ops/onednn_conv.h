// conv_general_dilated's f32 kernels on oneDNN's convolution primitives (ops/conv.cpp decides
// which calls come here; ops/onednn_runtime.h runs them: one OpenMP thread, cached primitives).
//
// Every function takes the geometry of a *forward* convolution in the engine's layout,
// x [B, H, W, C] (NHWC), w [KH, KW, C, O] (HWIO), y [B, H', W', O] (NHWC), and computes
//   forward          y = conv(x, w)                          (convolution_forward)
//   backward data    dx = the input's cotangent for dy       (convolution_backward_data)
//   backward weights dw = the kernel's cotangent for x, dy   (convolution_backward_weights)
// Activations stay NHWC (oneDNN's `nhwc` tag); the kernel is laid out as oneDNN's implementation
// prefers (format_tag::any), reordered from or into HWIO around each call (a kernel is small next
// to the activations, and the jit kernels only read blocked weights: given HWIO itself, oneDNN
// picks its slower gemm-based kernels).
#pragma once

#include <array>
#include <cstdint>

#include "pmap_engine/array.h"

namespace pmap_engine {

struct OneDnnConvGeometry {
  Shape x, w, y;                      // NHWC, HWIO, NHWC
  std::array<int64_t, 2> strides;     // H, W
  std::array<int64_t, 2> dilation;    // the kernel's (rhs) dilation as lax counts it: 1 = none
  std::array<int64_t, 2> padding_lo;  // non-negative (oneDNN has no cropping)
  std::array<int64_t, 2> padding_hi;  // non-negative
};

void onednn_conv_forward(const OneDnnConvGeometry& g, const float* x, const float* w, float* y);
void onednn_conv_backward_data(const OneDnnConvGeometry& g, const float* dy, const float* w,
                               float* dx);
void onednn_conv_backward_weights(const OneDnnConvGeometry& g, const float* x, const float* dy,
                                  float* dw);

}  // namespace pmap_engine
