#include "output_relations.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "parity/common/error.h"

namespace parity::compare {
namespace {

// ||d|| / ||b|| from the sums of squares; 0 / 0 = 0, x / 0 = infinity.
double relative(double dd, double bb) {
  if (bb > 0) return std::sqrt(dd / bb);
  return dd > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// One axis of B read at i + offset: the two grid points around it and the second one's weight
// (0 when the position is a grid point). False when the position is off the grid.
struct Sample {
  int64_t low = 0;
  double weight = 0;
};
bool sample(int64_t i, double offset, int64_t size, Sample& out) {
  const double position = static_cast<double>(i) + offset;
  const double low = std::floor(position);
  out.low = static_cast<int64_t>(low);
  out.weight = position - low;
  const int64_t last = out.weight > 0 ? out.low + 1 : out.low;
  return out.low >= 0 && last < size;
}

// ||A - B read at (i + oy, j + ox)|| / ||B read there||, over the positions where B is defined;
// NaN when there are none.
double moved_residual(const std::vector<double>& a, const std::vector<double>& b,
                      const Shape& shape, double oy, double ox) {
  const int64_t n = shape[0], h = shape[1], w = shape[2], c = shape[3];
  const auto at = [&](int64_t image, int64_t y, int64_t x, int64_t channel) {
    return b[static_cast<size_t>(((image * h + y) * w + x) * c + channel)];
  };
  double dd = 0, bb = 0;
  bool any = false;
  for (int64_t i = 0; i < h; ++i) {
    Sample sy;
    if (!sample(i, oy, h, sy)) continue;
    for (int64_t j = 0; j < w; ++j) {
      Sample sx;
      if (!sample(j, ox, w, sx)) continue;
      any = true;
      for (int64_t image = 0; image < n; ++image) {
        for (int64_t channel = 0; channel < c; ++channel) {
          // Terms of weight 0 are left out: they may lie one past the grid.
          double moved = (1 - sy.weight) * (1 - sx.weight) * at(image, sy.low, sx.low, channel);
          if (sx.weight > 0)
            moved += (1 - sy.weight) * sx.weight * at(image, sy.low, sx.low + 1, channel);
          if (sy.weight > 0)
            moved += sy.weight * (1 - sx.weight) * at(image, sy.low + 1, sx.low, channel);
          if (sy.weight > 0 && sx.weight > 0) {
            moved += sy.weight * sx.weight * at(image, sy.low + 1, sx.low + 1, channel);
          }
          const double d = a[static_cast<size_t>(((image * h + i) * w + j) * c + channel)] - moved;
          dd += d * d;
          bb += moved * moved;
        }
      }
    }
  }
  return any ? relative(dd, bb) : std::numeric_limits<double>::quiet_NaN();
}

// The convolution of x with the kernel at one placement, less `out`: ||conv - out||^2.
double conv_misfit(const std::vector<double>& x, const Shape& x_shape,
                   const std::vector<double>& kernel, const Shape& kernel_shape,
                   const std::vector<double>& bias, const std::array<int64_t, 2>& strides,
                   const std::array<int64_t, 2>& before, const std::vector<double>& out,
                   const Shape& out_shape) {
  const int64_t n = x_shape[0], h = x_shape[1], w = x_shape[2], cin = x_shape[3];
  const int64_t kh = kernel_shape[0], kw = kernel_shape[1], cout = kernel_shape[3];
  const int64_t oh = out_shape[1], ow = out_shape[2];
  std::vector<double> sum(static_cast<size_t>(cout));
  double misfit = 0;
  for (int64_t image = 0; image < n; ++image) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t c = 0; c < cout; ++c) sum[c] = bias.empty() ? 0 : bias[c];
        for (int64_t di = 0; di < kh; ++di) {
          const int64_t y = i * strides[0] - before[0] + di;
          if (y < 0 || y >= h) continue;  // padding: zeros
          for (int64_t dj = 0; dj < kw; ++dj) {
            const int64_t xx = j * strides[1] - before[1] + dj;
            if (xx < 0 || xx >= w) continue;
            const double* pixel = &x[static_cast<size_t>(((image * h + y) * w + xx) * cin)];
            const double* taps = &kernel[static_cast<size_t>((di * kw + dj) * cin * cout)];
            for (int64_t ci = 0; ci < cin; ++ci) {
              for (int64_t c = 0; c < cout; ++c) sum[c] += pixel[ci] * taps[ci * cout + c];
            }
          }
        }
        const double* recorded = &out[static_cast<size_t>(((image * oh + i) * ow + j) * cout)];
        for (int64_t c = 0; c < cout; ++c) misfit += (sum[c] - recorded[c]) * (sum[c] - recorded[c]);
      }
    }
  }
  return misfit;
}

// The least padding after the image for windows starting `before` pixels ahead to give `size`
// outputs; nullopt when no padding within the window's extent does.
std::optional<int64_t> padding_after(int64_t input, int64_t window, int64_t stride, int64_t before,
                                     int64_t size) {
  const int64_t after = std::max<int64_t>(0, (size - 1) * stride + window - input - before);
  if (after >= window || (input + before + after - window) / stride + 1 != size) return std::nullopt;
  return after;
}

}  // namespace

std::vector<WindowPlacement> conv_window_placements(
    const std::vector<double>& x, const Shape& x_shape, const std::vector<double>& kernel,
    const Shape& kernel_shape, const std::vector<double>& bias,
    const std::array<int64_t, 2>& strides, const std::vector<double>& out, const Shape& out_shape) {
  PARITY_CHECK(x_shape.size() == 4 && kernel_shape.size() == 4 && out_shape.size() == 4 &&
               x.size() == shape_num_elements(x_shape) &&
               kernel.size() == shape_num_elements(kernel_shape) &&
               out.size() == shape_num_elements(out_shape) && kernel_shape[2] == x_shape[3] &&
               kernel_shape[3] == out_shape[3] && x_shape[0] == out_shape[0] &&
               (bias.empty() || static_cast<int64_t>(bias.size()) == out_shape[3]));
  double norm = 0;
  for (const double value : out) norm += value * value;
  std::vector<WindowPlacement> placements;
  for (int64_t top = 0; top < kernel_shape[0]; ++top) {
    const auto bottom = padding_after(x_shape[1], kernel_shape[0], strides[0], top, out_shape[1]);
    if (!bottom) continue;
    for (int64_t left = 0; left < kernel_shape[1]; ++left) {
      const auto right = padding_after(x_shape[2], kernel_shape[1], strides[1], left, out_shape[2]);
      if (!right) continue;
      WindowPlacement placement{{top, left}, {*bottom, *right}, 0};
      placement.residual = relative(
          conv_misfit(x, x_shape, kernel, kernel_shape, bias, strides, placement.before, out,
                      out_shape),
          norm);
      placements.push_back(placement);
    }
  }
  std::sort(placements.begin(), placements.end(),
            [](const WindowPlacement& p, const WindowPlacement& q) { return p.residual < q.residual; });
  return placements;
}

GridShift best_grid_shift(const std::vector<double>& a, const std::vector<double>& b,
                          const Shape& shape, const std::array<int64_t, 2>& strides) {
  PARITY_CHECK(shape.size() == 4 && a.size() == b.size() && a.size() == shape_num_elements(shape));
  GridShift best;
  best.unshifted = moved_residual(a, b, shape, 0, 0);
  best.residual = best.unshifted;
  best.next_best = std::numeric_limits<double>::infinity();
  for (int64_t dy = -1; dy <= 1; ++dy) {
    for (int64_t dx = -1; dx <= 1; ++dx) {
      if (dy == 0 && dx == 0) continue;
      const double residual =
          moved_residual(a, b, shape, static_cast<double>(dy) / static_cast<double>(strides[0]),
                         static_cast<double>(dx) / static_cast<double>(strides[1]));
      // NaN (no overlap) never wins; on a tie no move, then the move found first, wins.
      if (residual < best.residual) {
        best.next_best = best.residual;
        best.residual = residual;
        best.dy = dy;
        best.dx = dx;
      } else if (residual < best.next_best) {
        best.next_best = residual;
      }
    }
  }
  return best;
}

RowRatios norm_row_ratios(const std::vector<double>& a, const std::vector<double>& b,
                          const Shape& shape, bool per_channel) {
  PARITY_CHECK(!shape.empty() && a.size() == b.size() && a.size() == shape_num_elements(shape));
  const auto width = static_cast<size_t>(shape.back());
  const size_t rows = per_channel ? width : (width == 0 ? 0 : a.size() / width);
  // Element k of row r: a LayerNorm's rows are contiguous, a BatchNorm channel's values are
  // `width` apart.
  const size_t length = per_channel ? (width == 0 ? 0 : a.size() / width) : width;
  const auto index = [&](size_t row, size_t k) {
    return per_channel ? k * width + row : row * width + k;
  };
  RowRatios out;
  out.rows = static_cast<int64_t>(rows);
  out.min = std::numeric_limits<double>::infinity();
  out.max = -std::numeric_limits<double>::infinity();
  for (size_t row = 0; row < rows; ++row) {
    double ab = 0, bb = 0;
    for (size_t k = 0; k < length; ++k) {
      ab += a[index(row, k)] * b[index(row, k)];
      bb += b[index(row, k)] * b[index(row, k)];
    }
    const double ratio = bb > 0 ? ab / bb : 1.0;
    double dd = 0;
    for (size_t k = 0; k < length; ++k) {
      const double d = a[index(row, k)] - ratio * b[index(row, k)];
      dd += d * d;
    }
    out.min = std::min(out.min, ratio);
    out.max = std::max(out.max, ratio);
    out.max_residual = std::max(out.max_residual, relative(dd, bb));
  }
  return out;
}

}  // namespace parity::compare
