// The figures that tell a diverging layer's cause, on outputs built to relate in a known way:
// windows moved by whole output pixels (stride 1) and by half of one (stride 2, the 'SAME'
// against padding=1 case), and normalisations whose rows differ by a factor each.
#include "output_relations.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace parity::compare {
namespace {

using Field = std::function<double(double y, double x, int64_t image, int64_t channel)>;

// [n, h, w, c] values, value(n, i, j, c) = field(at(i), at(j), n, c).
std::vector<double> sample_field(const Field& field, const Shape& shape,
                                 const std::function<double(int64_t)>& at) {
  std::vector<double> values;
  for (int64_t n = 0; n < shape[0]; ++n) {
    for (int64_t i = 0; i < shape[1]; ++i) {
      for (int64_t j = 0; j < shape[2]; ++j) {
        for (int64_t c = 0; c < shape[3]; ++c) values.push_back(field(at(i), at(j), n, c));
      }
    }
  }
  return values;
}

// A field without structure: no two positions share a value by accident.
double rough(double y, double x, int64_t n, int64_t c) {
  const double scaled = std::sin(12.9898 * y + 78.233 * x + 3.1 * static_cast<double>(n) +
                                 1.7 * static_cast<double>(c)) *
                        43758.5453;
  return scaled - std::floor(scaled);
}

// Stride 1, a whole pixel each way: A(i, j) = g(i + 2, j) and B(i, j) = g(i + 1, j + 1), so
// A(i, j) = B(i + 1, j - 1): B's window moved by (1, -1), exactly, whatever g is.
TEST(OutputRelations, AWindowMovedByWholePixelsIsFoundExactly) {
  const Shape shape = {2, 9, 10, 3};
  std::vector<double> a, b;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t i = 0; i < 9; ++i) {
      for (int64_t j = 0; j < 10; ++j) {
        for (int64_t c = 0; c < 3; ++c) {
          a.push_back(rough(static_cast<double>(i + 2), static_cast<double>(j), n, c));
          b.push_back(rough(static_cast<double>(i + 1), static_cast<double>(j + 1), n, c));
        }
      }
    }
  }
  const GridShift shift = best_grid_shift(a, b, shape, {1, 1});
  EXPECT_EQ(shift.dy, 1);
  EXPECT_EQ(shift.dx, -1);
  EXPECT_EQ(shift.residual, 0.0);  // the same numbers, read at other places
  EXPECT_GT(shift.next_best, 0.1);
  EXPECT_GT(shift.unshifted, 0.1);
  // Equal outputs: no move.
  const GridShift none = best_grid_shift(b, b, shape, {1, 1});
  EXPECT_EQ(none.dy, 0);
  EXPECT_EQ(none.dx, 0);
  EXPECT_EQ(none.residual, 0.0);
}

// Stride 2: a 'SAME' window at output i starts at input pixel 2i, a padding=1 window at 2i - 1
// (layer_outputs_test derives it; here f(p) stands for the window starting at input pixel p).
// So A(i) = f(2i) = B(i + 1/2): B's window moved by one input pixel, half an output pixel, read
// between B's grid points. For f linear in the position the interpolation is exact; with both
// slopes positive no other move in {-1, 0, 1}^2 matches (for a move of dy, dx input pixels,
// A - B moved = 0.25 (1 - dy) + 0.5 (1 - dx), zero only at (1, 1)).
TEST(OutputRelations, AStrideTwoWindowMovedByOneInputPixelIsHalfAnOutputPixel) {
  const Shape shape = {1, 7, 7, 2};
  const Field linear = [](double y, double x, int64_t, int64_t c) {
    return 0.25 * y + 0.5 * x + static_cast<double>(c);
  };
  const auto same = [](int64_t i) { return 2.0 * static_cast<double>(i); };
  const auto padded = [](int64_t i) { return 2.0 * static_cast<double>(i) - 1.0; };
  const GridShift exact = best_grid_shift(sample_field(linear, shape, same),
                                          sample_field(linear, shape, padded), shape, {2, 2});
  EXPECT_EQ(exact.dy, 1);
  EXPECT_EQ(exact.dx, 1);
  EXPECT_LT(exact.residual, 1e-15);
  EXPECT_GT(exact.unshifted, 0.1);
  // A smooth field that is not linear: the right move is off by the interpolation's second-order
  // term, each wrong one by a first-order term, several times larger.
  const Field smooth = [](double y, double x, int64_t, int64_t c) {
    return std::sin(0.3 * y + 0.1 * static_cast<double>(c)) * std::cos(0.2 * x) + 2.0;
  };
  const GridShift near = best_grid_shift(sample_field(smooth, shape, same),
                                         sample_field(smooth, shape, padded), shape, {2, 2});
  EXPECT_EQ(near.dy, 1);
  EXPECT_EQ(near.dx, 1);
  EXPECT_LT(near.residual * 4, near.unshifted);
}

// A LayerNorm whose epsilon differs scales each row (token) by its own factor
// sqrt((var + eps_b) / (var + eps_a)); a BatchNorm each channel.
TEST(OutputRelations, RowRatiosAreEachRowsFactorAndZeroResidualForMultiples) {
  const Shape shape = {2, 3, 4};  // 6 rows of 4 features
  std::vector<double> a, b;
  for (int64_t row = 0; row < 6; ++row) {
    for (int64_t k = 0; k < 4; ++k) {
      const double value = rough(static_cast<double>(row), static_cast<double>(k), 0, 0) - 0.5;
      b.push_back(value);
      a.push_back(value * (1.0 + 0.001 * static_cast<double>(row)));
    }
  }
  const RowRatios rows = norm_row_ratios(a, b, shape, /*per_channel=*/false);
  EXPECT_EQ(rows.rows, 6);
  EXPECT_NEAR(rows.min, 1.0, 1e-12);
  EXPECT_NEAR(rows.max, 1.005, 1e-12);
  EXPECT_LT(rows.max_residual, 1e-12);
  // Read per channel (4 channels of 6 values) the same numbers are no multiples: each channel
  // mixes rows of different factors.
  const RowRatios channels = norm_row_ratios(a, b, shape, /*per_channel=*/true);
  EXPECT_EQ(channels.rows, 4);
  EXPECT_GT(channels.max_residual, 1e-4);

  // Per channel: channel c scaled by 1 - 0.01 c.
  std::vector<double> scaled;
  for (size_t i = 0; i < b.size(); ++i)
    scaled.push_back(b[i] * (1.0 - 0.01 * static_cast<double>(i % 4)));
  const RowRatios per_channel = norm_row_ratios(scaled, b, shape, /*per_channel=*/true);
  EXPECT_NEAR(per_channel.min, 0.97, 1e-12);
  EXPECT_NEAR(per_channel.max, 1.0, 1e-12);
  EXPECT_LT(per_channel.max_residual, 1e-12);
}

// A 3x3 box filter at stride 2 over a 4x4 image holding 1..16 row by row (x[r][c] = 4r + c + 1),
// its sums derived by hand. torch's padding=1 starts the windows at pixel -1: rows and columns
// (-1..1, 1..3), so out = [[1+2+5+6, 2+3+4+6+7+8], [5+6+9+10+13+14, 6+7+8+10+11+12+14+15+16]]
// = [[14, 30], [57, 99]]. 'SAME' pads (0, 1): windows at 0..2 and 2..4, out = [[54, 45], [72, 54]].
TEST(OutputRelations, AConvsPaddingIsTheOneWhoseWindowsReproduceItsOutput) {
  const Shape x_shape = {1, 4, 4, 1}, kernel_shape = {3, 3, 1, 1}, out_shape = {1, 2, 2, 1};
  std::vector<double> x;
  for (int value = 1; value <= 16; ++value) x.push_back(value);
  const std::vector<double> box(9, 1.0);
  const auto placements = [&](const std::vector<double>& out) {
    return conv_window_placements(x, x_shape, box, kernel_shape, {}, {2, 2}, out, out_shape);
  };
  const std::vector<WindowPlacement> torch_like = placements({14, 30, 57, 99});
  // Padding before 0, 1 or 2 on each axis gives 2 outputs (more would start a window wholly in
  // the padding): nine placements.
  ASSERT_EQ(torch_like.size(), 9u);
  EXPECT_EQ(torch_like[0].before, (std::array<int64_t, 2>{1, 1}));
  // The last window (pixels 1..3) reads nothing after the image: torch's second pad pixel is
  // never seen.
  EXPECT_EQ(torch_like[0].after, (std::array<int64_t, 2>{0, 0}));
  EXPECT_EQ(torch_like[0].residual, 0.0);
  EXPECT_GT(torch_like[1].residual, 0.1);

  const std::vector<WindowPlacement> same = placements({54, 45, 72, 54});
  EXPECT_EQ(same[0].before, (std::array<int64_t, 2>{0, 0}));
  EXPECT_EQ(same[0].after, (std::array<int64_t, 2>{1, 1}));
  EXPECT_EQ(same[0].residual, 0.0);
  EXPECT_GT(same[1].residual, 0.1);

  // A bias adds to every output.
  const std::vector<WindowPlacement> biased = conv_window_placements(
      x, x_shape, box, kernel_shape, {0.5}, {2, 2}, {14.5, 30.5, 57.5, 99.5}, out_shape);
  EXPECT_EQ(biased[0].before, (std::array<int64_t, 2>{1, 1}));
  EXPECT_EQ(biased[0].residual, 0.0);
}

}  // namespace
}  // namespace parity::compare
