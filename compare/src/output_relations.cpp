#include "output_relations.h"

#include <cmath>
#include <limits>

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

}  // namespace

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
