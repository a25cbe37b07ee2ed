// XLA:CPU's f32 tanh, exp and logistic (pmap_engine/src/ops/xla_math.h): the special values each
// formula defines, and the accuracy measured over the f32 range, asserted on a strided sample
// (every 509th float: ~0.2% of the dense sweep, a few milliseconds).
//
// Accuracy is stated twice, in ulps (distance between float bit patterns, same-sign order):
//   vs correctly rounded  against the double-precision <cmath> value rounded to float (results
//                         in the normal range; exp flushes results below 2^-126, see below)
//   vs glibc              against the float <cmath> function the engine called before
// The bounds are those of the dense sweeps recorded in the comments (tanh: every float of the
// range; exp and logistic: every 5th float), maxima over results in the normal range:
//   tanh      5 ulp vs correctly rounded (at 3.737289), 5 ulp vs glibc; differs from glibc on 40%
//   exp       1 ulp vs correctly rounded, 1 ulp vs glibc; differs from glibc on 2.7% (x > 0)
//   logistic  2 ulp vs correctly rounded, 4 ulp vs glibc's 1 / (1 + expf(-x)); differs on 1.2%
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/xla_math.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

namespace xm = xla_math;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float one(xm::F32BlockFn fn, float x) {
  float y;
  fn(&x, &y, 1);
  return y;
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

int64_t ulp_distance(float a, float b) {
  auto ordered = [](float v) {
    const auto i = static_cast<int32_t>(bits_of(v));
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

struct Worst {
  int64_t vs_correctly_rounded = 0;
  int64_t vs_glibc = 0;
};

// Every 509th float with magnitude in [low, high], both signs when `both_signs`.
template <typename Exact, typename Glibc>
Worst sweep(xm::F32BlockFn fn, float low, float high, bool both_signs, Exact exact, Glibc glibc) {
  std::vector<float> in;
  for (uint32_t b = bits_of(low); b <= bits_of(high); b += 509) {
    in.push_back(float_of(b));
    if (both_signs) in.push_back(-float_of(b));
  }
  std::vector<float> out(in.size());
  fn(in.data(), out.data(), in.size());
  Worst worst;
  for (size_t i = 0; i < in.size(); ++i) {
    const float rounded = static_cast<float>(exact(static_cast<double>(in[i])));
    if (std::fabs(rounded) < std::numeric_limits<float>::min()) continue;  // see SpecialValues
    worst.vs_correctly_rounded = std::max(worst.vs_correctly_rounded, ulp_distance(out[i], rounded));
    worst.vs_glibc = std::max(worst.vs_glibc, ulp_distance(out[i], glibc(in[i])));
  }
  return worst;
}

// xla/codegen/intrinsic/tanh.cc, EmitFastTanh: x itself below 0.0004, copysign(1, x) from 20 on,
// the rational approximation of the input clamped to +-7.99881172180175781 in between.
TEST(XlaMathTanh, SpecialValues) {
  EXPECT_EQ(bits_of(one(xm::tanh_f32, 0.0f)), bits_of(0.0f));
  EXPECT_EQ(bits_of(one(xm::tanh_f32, -0.0f)), bits_of(-0.0f));
  EXPECT_EQ(one(xm::tanh_f32, 3e-4f), 3e-4f);  // the small-input path returns x
  EXPECT_EQ(one(xm::tanh_f32, kInf), 1.0f);
  EXPECT_EQ(one(xm::tanh_f32, -kInf), -1.0f);
  EXPECT_TRUE(std::isnan(one(xm::tanh_f32, kNaN)));
  EXPECT_EQ(one(xm::tanh_f32, 20.0f), 1.0f);
  // Saturation: the clamp is where the FMA evaluation reaches exactly 1.
  EXPECT_EQ(one(xm::tanh_f32, 7.99881172180175781f), 1.0f);
  EXPECT_EQ(one(xm::tanh_f32, -7.99881172180175781f), -1.0f);
  EXPECT_EQ(one(xm::tanh_f32, 12.0f), 1.0f);
  EXPECT_LT(one(xm::tanh_f32, 7.0f), 1.0f);
  // Odd: every step of the formula is.
  for (float x : {0.001f, 0.3f, 1.0f, 2.5f, 6.0f}) {
    EXPECT_EQ(one(xm::tanh_f32, -x), -one(xm::tanh_f32, x)) << x;
  }
}

// Dense sweep: all floats with 2^-30 <= |x| <= 20 (below, tanh is x; above, exactly +-1).
TEST(XlaMathTanh, UlpErrorWithinMeasuredBounds) {
  const Worst worst = sweep(
      xm::tanh_f32, 0x1p-30f, 20.0f, true, [](double x) { return std::tanh(x); },
      [](float x) { return std::tanh(x); });
  EXPECT_LE(worst.vs_correctly_rounded, 5);
  EXPECT_LE(worst.vs_glibc, 5);
}

// xla/backends/cpu/codegen/polynomial_approximations.cc, GenerateVF32Exp: input clamped to
// [-87.8, 88.8], n = round(x / ln 2) clamped to [-127, 128], 2^-127 built as 0.
TEST(XlaMathExp, SpecialValues) {
  EXPECT_EQ(one(xm::exp_f32, 0.0f), 1.0f);
  EXPECT_EQ(one(xm::exp_f32, -0.0f), 1.0f);
  EXPECT_EQ(one(xm::exp_f32, kInf), kInf);
  EXPECT_EQ(bits_of(one(xm::exp_f32, -kInf)), bits_of(0.0f));
  EXPECT_TRUE(std::isnan(one(xm::exp_f32, kNaN)));
  // Overflow where glibc's does: 88.7228317 (0x1.62e42ep+6) is the last finite input, its result
  // the correctly rounded 0x1.ffff08p+127 (the n = 128 path: z's exponent raised, times 2^127).
  EXPECT_EQ(one(xm::exp_f32, 0x1.62e42ep+6f), 0x1.ffff08p+127f);
  EXPECT_EQ(one(xm::exp_f32, 0x1.62e430p+6f), kInf);
  EXPECT_EQ(one(xm::exp_f32, 89.0f), kInf);
  // Underflow: n = -127, i.e. x <= -87.6831284 (-126.5 ln 2), gives 0 where glibc still gives a
  // subnormal (XLA flushes them); just above, n = -126 and the result z * 2^-126 may be subnormal.
  EXPECT_EQ(bits_of(one(xm::exp_f32, -0x1.5ebb86p+6f)), bits_of(0.0f));
  EXPECT_GT(std::exp(-0x1.5ebb86p+6f), 0.0f);
  EXPECT_GT(one(xm::exp_f32, -0x1.5ebb84p+6f), 0.0f);
  EXPECT_EQ(one(xm::exp_f32, -87.5f), 0x1.b2cafp-127f);  // subnormal, here as glibc's
}

// Dense sweep: every 5th float with 2^-30 <= x <= 89 and 2^-30 <= -x <= 104 (results below 2^-126
// are counted apart: XLA flushes them).
TEST(XlaMathExp, UlpErrorWithinMeasuredBounds) {
  const Worst positive = sweep(
      xm::exp_f32, 0x1p-30f, 89.0f, false, [](double x) { return std::exp(x); },
      [](float x) { return std::exp(x); });
  const Worst negative = sweep(
      [](const float* in, float* out, size_t n) {
        std::vector<float> negated(in, in + n);
        for (float& v : negated) v = -v;
        xm::exp_f32(negated.data(), out, n);
      },
      0x1p-30f, 104.0f, false, [](double x) { return std::exp(-x); },
      [](float x) { return std::exp(-x); });
  EXPECT_LE(std::max(positive.vs_correctly_rounded, negative.vs_correctly_rounded), 1);
  EXPECT_LE(positive.vs_glibc, 1);
}

// 1 / (1 + exp(-x)) (XLA's LogisticExpander), exp as above.
TEST(XlaMathLogistic, SpecialValues) {
  EXPECT_EQ(one(xm::logistic_f32, 0.0f), 0.5f);
  EXPECT_EQ(one(xm::logistic_f32, kInf), 1.0f);
  EXPECT_EQ(bits_of(one(xm::logistic_f32, -kInf)), bits_of(0.0f));
  EXPECT_TRUE(std::isnan(one(xm::logistic_f32, kNaN)));
  EXPECT_EQ(one(xm::logistic_f32, 20.0f), 1.0f);  // 1 + 2e-9 rounds to 1
}

// Dense sweep: every 5th float with 2^-30 <= |x| <= 104.
TEST(XlaMathLogistic, UlpErrorWithinMeasuredBounds) {
  const Worst worst = sweep(
      xm::logistic_f32, 0x1p-30f, 104.0f, true,
      [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
      [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
  EXPECT_LE(worst.vs_correctly_rounded, 2);
  EXPECT_LE(worst.vs_glibc, 4);
}

// The kernels use the block functions for f32, and for bf16/f16 through f32 (XLA upcasts them);
// f64 keeps <cmath>.
TEST(XlaMathKernels, PrimitivesUseTheBlockFunctionsForF32AndHalfTypes) {
  const std::vector<float> x = {-9.0f, -2.5f, -0.3f, 0.0f, 1e-5f, 0.7f, 3.0f, 30.0f};
  const Array a = Array::from_floats({static_cast<int64_t>(x.size())}, x);
  std::vector<float> expected(x.size());
  xm::tanh_f32(x.data(), expected.data(), x.size());
  EXPECT_EQ(tanh(a).to_floats(), expected);
  xm::exp_f32(x.data(), expected.data(), x.size());
  EXPECT_EQ(exp(a).to_floats(), expected);
  xm::logistic_f32(x.data(), expected.data(), x.size());
  EXPECT_EQ(sigmoid(a).to_floats(), expected);

  const Array half = astype(a, DType::bf16);
  const std::vector<float> widened = half.to_floats();
  xm::tanh_f32(widened.data(), expected.data(), x.size());
  EXPECT_EQ(tanh(half).to_floats(), astype(Array::from_floats(a.shape(), expected), DType::bf16)
                                        .to_floats());

  const std::vector<double> d = {-2.5, 0.7, 3.0};
  const std::vector<double> t = tanh(Array::from_doubles({3}, d)).to_doubles();
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(t[i], std::tanh(d[i]));
}

}  // namespace
}  // namespace pmap_engine
