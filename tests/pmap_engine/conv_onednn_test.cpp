// conv_general_dilated's oneDNN kernels (f32 forward, input cotangent, kernel cotangent) and
// its reference im2col/scatter kernels (PE_CONV=im2col) against the f64 conv, on shapes that
// exercise strides, SAME padding on odd sizes, kernel dilation, 1x1 stride-2 projections, batch
// 1, one channel, negative padding, and the shapes oneDNN cannot express (lhs dilation, padding
// both negative and wider than the kernel), which fall back to the reference kernels.
//
// Run it on both of oneDNN's x86 paths: as is (AVX-512 where the CPU has it) and with
// DNNL_MAX_CPU_ISA=AVX2 (docs/engine.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using testing::irregular;

struct ConvCase {
  std::string name;
  Shape x_shape;  // NHWC
  Shape w_shape;  // HWIO
  std::vector<int64_t> strides;
  std::vector<PadPair> padding;
  std::vector<int64_t> lhs_dilation = {1, 1};
  std::vector<int64_t> rhs_dilation = {1, 1};
};

const std::vector<ConvCase>& cases() {
  static const std::vector<ConvCase> all = {
      {"3x3 stride 1 SAME", {2, 8, 8, 3}, {3, 3, 3, 4}, {1, 1}, {{1, 1}, {1, 1}}},
      {"3x3 stride 2 SAME on odd sizes",
       {3, 7, 9, 2},
       {3, 3, 2, 5},
       {2, 2},
       padtype_to_pads({7, 9}, {3, 3}, {2, 2}, "SAME")},
      {"cnn 3x3 16 to 32 stride 2", {2, 28, 28, 16}, {3, 3, 16, 32}, {2, 2}, {{1, 1}, {1, 1}}},
      {"3x3 stride 2 VALID with a leftover row",
       {2, 10, 10, 3},
       {3, 3, 3, 2},
       {2, 2},
       {{0, 0}, {0, 0}}},
      {"kernel dilation, uneven strides and padding",
       {2, 9, 8, 3},
       {2, 3, 3, 4},
       {1, 2},
       {{2, 1}, {0, 3}},
       {1, 1},
       {2, 3}},
      {"1x1 stride 2 projection", {3, 14, 14, 4}, {1, 1, 4, 8}, {2, 2}, {{0, 0}, {0, 0}}},
      {"1x1 stride 2 on odd sizes", {2, 7, 9, 3}, {1, 1, 3, 5}, {2, 2}, {{0, 0}, {0, 0}}},
      {"1x1 stride 1", {2, 6, 5, 7}, {1, 1, 7, 3}, {1, 1}, {{0, 0}, {0, 0}}},
      {"batch 1, one channel stem", {1, 28, 28, 1}, {3, 3, 1, 16}, {1, 1}, {{1, 1}, {1, 1}}},
      {"4x4 stride 4 patch embedding with leftovers",
       {2, 10, 11, 1},
       {4, 4, 1, 6},
       {4, 4},
       {{0, 0}, {0, 0}}},
      {"5x5 stride 2 SAME",
       {2, 13, 12, 4},
       {5, 5, 4, 3},
       {2, 2},
       padtype_to_pads({13, 12}, {5, 5}, {2, 2}, "SAME")},
      {"stride 3 over 2 taps: rows no window reads",
       {2, 8, 10, 3},
       {2, 2, 3, 2},
       {3, 3},
       {{1, 0}, {0, 0}}},
      {"negative padding (as a backward data pass)",
       {2, 9, 8, 2},
       {2, 3, 2, 2},
       {1, 1},
       {{-1, -2}, {1, -1}},
       {1, 1},
       {2, 1}},
      {"negative and wide padding (reference kernels)",
       {2, 6, 7, 2},
       {2, 2, 2, 3},
       {1, 1},
       {{-1, 0}, {3, 0}}},
      {"lhs dilation (reference kernels)",
       {2, 5, 4, 3},
       {3, 2, 3, 4},
       {3, 2},
       {{1, 2}, {2, 0}},
       {2, 3},
       {1, 2}},
  };
  return all;
}

// Selects the conv implementation for its lifetime: PE_CONV=im2col, or the default.
class ConvImplementation {
 public:
  explicit ConvImplementation(bool reference) {
    if (reference) setenv("PE_CONV", "im2col", 1);
  }
  ~ConvImplementation() { unsetenv("PE_CONV"); }
};

// The forward conv, the input's cotangent and the kernel's cotangent for output cotangent g.
std::vector<Array> conv_and_cotangents(const ConvCase& c, const Array& x, const Array& w,
                                       const Array& g) {
  auto conv = [&](const Array& lhs, const Array& rhs) {
    return conv_general_dilated(lhs, rhs, c.strides, c.padding, c.lhs_dilation, c.rhs_dilation);
  };
  TreeFunction loss = [&](const std::vector<Tree>& args) {
    return Tree(sum(conv(args[0].leaf(), args[1].leaf()) * g));
  };
  Tree grads = grad(loss, {0, 1})({Tree(x), Tree(w)});
  return {conv(x, w), grads[0].leaf(), grads[1].leaf()};
}

// Each result element is a sum of n products. Summed in f32 in any order (any tree of
// additions, fused multiply-adds included), its error is at most gamma_n * sum |products|,
// gamma_n = n * u / (1 - n * u), u = 2^-24 (Higham, Accuracy and Stability of Numerical
// Algorithms, 2nd ed., section 3.1), on top of the operands being exact in f32. The sums of
// |products| are the same results computed in f64 on |x|, |w|, |g| (every formula is a sum of
// products, linear in each operand). n per result: KH * KW * C taps for the forward, at most
// KH * KW * O for the input's cotangent, B * H' * W' positions for the kernel's.
void expect_within_f32_rounding(const ConvCase& c, bool reference) {
  const Array x = astype(irregular(c.x_shape, 0.2), DType::f32);
  const Array w = astype(irregular(c.w_shape, 0.6), DType::f32);
  const Shape out_shape = conv_general_dilated(astype(x, DType::f64), astype(w, DType::f64),
                                               c.strides, c.padding, c.lhs_dilation, c.rhs_dilation)
                              .shape();
  const Array g = astype(irregular(out_shape, 1.1), DType::f32);
  std::vector<Array> got;
  {
    const ConvImplementation implementation(reference);
    got = conv_and_cotangents(c, x, w, g);
  }
  const std::vector<Array> exact =
      conv_and_cotangents(c, astype(x, DType::f64), astype(w, DType::f64), astype(g, DType::f64));
  const std::vector<Array> magnitude = conv_and_cotangents(
      c, abs(astype(x, DType::f64)), abs(astype(w, DType::f64)), abs(astype(g, DType::f64)));
  const double terms[] = {static_cast<double>(c.w_shape[0] * c.w_shape[1] * c.w_shape[2]),
                          static_cast<double>(c.w_shape[0] * c.w_shape[1] * c.w_shape[3]),
                          static_cast<double>(out_shape[0] * out_shape[1] * out_shape[2])};
  const char* names[] = {"forward", "input's cotangent", "kernel's cotangent"};
  const double u = std::ldexp(1.0, -24);
  for (size_t r = 0; r < 3; ++r) {
    const std::vector<double> value = got[r].to_doubles();
    const std::vector<double> want = exact[r].to_doubles();
    const std::vector<double> scale = magnitude[r].to_doubles();
    ASSERT_EQ(got[r].dtype(), DType::f32) << names[r];
    ASSERT_EQ(value.size(), want.size()) << names[r];
    const double gamma = terms[r] * u / (1 - terms[r] * u);
    for (size_t i = 0; i < value.size(); ++i) {
      ASSERT_LE(std::abs(value[i] - want[i]), gamma * scale[i])
          << c.name << ", " << names[r] << ", element " << i << ", "
          << (reference ? "im2col" : "oneDNN");
    }
  }
}

TEST(ConvOneDnn, WithinF32RoundingOfTheF64Conv) {
  for (const ConvCase& c : cases()) expect_within_f32_rounding(c, false);
}

TEST(ConvReference, WithinF32RoundingOfTheF64Conv) {
  for (const ConvCase& c : cases()) expect_within_f32_rounding(c, true);
}

TEST(ConvOneDnn, HalfFloatsAreTheF32ConvRoundedOnce) {
  const ConvCase& c = cases()[1];
  for (DType half : {DType::bf16, DType::f16}) {
    const Array x = astype(irregular(c.x_shape, 0.2), half);
    const Array w = astype(irregular(c.w_shape, 0.6), half);
    const Array g = astype(irregular({3, 4, 5, 5}, 1.1), half);
    const std::vector<Array> got = conv_and_cotangents(c, x, w, g);
    const std::vector<Array> f32 =
        conv_and_cotangents(c, astype(x, DType::f32), astype(w, DType::f32), astype(g, DType::f32));
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(got[r].to_doubles(), astype(f32[r], half).to_doubles()) << dtype_name(half) << r;
    }
  }
}

TEST(ConvImplementationChoice, RejectsAnUnknownName) {
  setenv("PE_CONV", "winograd", 1);
  const Array x = astype(irregular({1, 4, 4, 1}), DType::f32);
  const Array w = astype(irregular({3, 3, 1, 1}), DType::f32);
  EXPECT_THROW(conv_general_dilated(x, w, {1, 1}, {{1, 1}, {1, 1}}), EngineError);
  unsetenv("PE_CONV");
}

}  // namespace
}  // namespace pmap_engine
