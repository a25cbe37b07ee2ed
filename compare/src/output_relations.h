// How two runs' outputs of one layer relate when they differ, the figures that tell the usual
// causes apart with equal inputs (../shared/docs/migration-defaults.md, Appendix B: "attribute
// the first diverging layer"):
//   - a window placed differently ('SAME' at stride 2 pads (0, 1) where torch's padding=1 pads
//     (1, 1)): one output is the other's moved on the input grid (best_grid_shift);
//   - a normalisation with another epsilon: each row of one output is the other's times a factor
//     sqrt((var + eps_b) / (var + eps_a)) that depends on the row's variance (norm_row_ratios).
// Both read NHWC / token-major values, row-major, as the run directory records layer outputs.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "parity/common/host_tensor.h"

namespace parity::compare {

// A's output at (i, j) against B's at (i + dy / sy, j + dx / sx) for (dy, dx) in input pixels
// and (sy, sx) the layer's strides: B's window moved by (dy, dx) input pixels. A move that is not
// a whole number of output pixels (one input pixel at stride 2) reads B between its grid points,
// interpolated bilinearly: exact for a window that is linear in its position, and off by a
// second-order term otherwise, where a wrong move is off by a first-order one.
struct GridShift {
  int64_t dy = 0, dx = 0;
  double residual = 0;   // ||A - B moved|| / ||B moved|| where both are defined
  double next_best = 0;  // the second smallest residual of the nine: how clear the choice is
  double unshifted = 0;  // the residual with no move
};
// The move in {-1, 0, 1}^2 with the smallest residual (no move on a tie). `shape`: [N, H, W, C].
GridShift best_grid_shift(const std::vector<double>& a, const std::vector<double>& b,
                          const Shape& shape, const std::array<int64_t, 2>& strides);

// Where a convolution's windows sit: the padding before and after the image along height and
// width, and how well a convolution so padded reproduces a recorded output.
struct WindowPlacement {
  std::array<int64_t, 2> before{0, 0}, after{0, 0};
  double residual = 0;  // ||conv(x) - out|| / ||out||
};
// Every placement of a convolution's windows that gives `out`'s size, best fit first: `x`
// [N, H, W, Cin] and `out` [N, OH, OW, Cout] (NHWC), `kernel` [KH, KW, Cin, Cout] (HWIO, Flax's
// layout), `bias` [Cout] or empty, `strides` the windows' step. The padding before ranges over
// 0..K-1; the padding after is the least the last window needs (more is never read). A placement
// differs from another only by where the first window starts, so this finds the padding before
// exactly, and the padding after as far as the output shows it.
std::vector<WindowPlacement> conv_window_placements(
    const std::vector<double>& x, const Shape& x_shape, const std::vector<double>& kernel,
    const Shape& kernel_shape, const std::vector<double>& bias,
    const std::array<int64_t, 2>& strides, const std::vector<double>& out, const Shape& out_shape);

// Each row's least-squares factor r = <a, b> / <b, b> (A ~ r B), over the rows of the
// normalisation: a LayerNorm's rows are the vectors along the last axis, a BatchNorm's the
// channels (every value of one channel index).
struct RowRatios {
  int64_t rows = 0;
  double min = 0, max = 0;  // of r over the rows
  // max over the rows of ||a - r b|| / ||b||: 0 when every row of A is a multiple of B's
  double max_residual = 0;
};
RowRatios norm_row_ratios(const std::vector<double>& a, const std::vector<double>& b,
                          const Shape& shape, bool per_channel);

}  // namespace parity::compare
