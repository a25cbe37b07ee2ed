// XLA:CPU's f32 tanh, exp and logistic (see xla_math.h for the sources and the rounding rule).
//
// Each function has two builds of one loop: one for CPUs with AVX2 and FMA, where GCC turns the
// std::fma calls into vfmadd instructions and vectorises the loop 8 floats wide, and one for the
// x86-64 baseline, where std::fma is glibc's correctly rounded fmaf. Both compute the same bits;
// the first is chosen once per process where the CPU has both (ops/cpu_isa.h). A plain `a * b + c` is never
// fused: this file is compiled with floating-point contraction off, so the only fused operations
// are the std::fma calls, placed where XLA's LLVM backend fuses. It is also compiled without
// trapping math: that changes no value (no reassociation, no contraction), it only lets GCC
// evaluate both sides of a select, which it needs to vectorise these loops. Both flags are set
// for this file in pmap_engine/CMakeLists.txt (a `#pragma GCC optimize` does not reach the
// inlined helpers).
#include "ops/xla_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "ops/cpu_isa.h"

namespace pmap_engine::xla_math {
namespace {

#define XLA_MATH_INLINE inline __attribute__((always_inline))

XLA_MATH_INLINE uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

XLA_MATH_INLINE float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Horner's rule from the leading coefficient, each step `acc * t + k` one fma. Unrolled at
// compile time, so that GCC vectorises the loops around it.
template <size_t kIndex = 0, size_t kCount>
XLA_MATH_INLINE float horner_from(float t, const float (&coeffs)[kCount], float acc) {
  if constexpr (kIndex + 1 == kCount) {
    return acc;
  } else {
    return horner_from<kIndex + 1>(t, coeffs, std::fma(acc, t, coeffs[kIndex + 1]));
  }
}

template <size_t kCount>
XLA_MATH_INLINE float horner(float t, const float (&coeffs)[kCount]) {
  return horner_from(t, coeffs, coeffs[0]);
}

// `x` clamped to [low, high]; NaN stays NaN, as XLA's selects on unordered comparisons keep it.
XLA_MATH_INLINE float clamp_keeping_nan(float x, float low, float high) {
  x = x < low ? low : x;
  return x > high ? high : x;
}

// tanh, after xla/codegen/intrinsic/tanh.cc EmitFastTanh(with_fma = true) (the rational
// approximation of Eigen's older ptanh, degree 13/6 in x):
//   |x| < 0.0004:  x
//   |x| >= 20:     copysign(1, x)
//   otherwise, with c the input clamped to +-7.99881172180175781 (where the FMA evaluation
//   reaches exactly +-1): c * P(c^2) / Q(c^2).
// Each Horner step `p * c^2 + k` is one IR fmul feeding one fadd: fused, one rounding. c^2, the
// final c * P and the division are rounded on their own.
XLA_MATH_INLINE float tanh_one(float x) {
  constexpr float kClamp = 7.99881172180175781f;
  constexpr float kNumerator[] = {-2.76076847742355e-16f, 2.00018790482477e-13f,
                                  -8.60467152213735e-11f, 5.12229709037114e-08f,
                                  1.48572235717979e-05f,  6.37261928875436e-04f,
                                  4.89352455891786e-03f};
  constexpr float kDenominator[] = {1.19825839466702e-06f, 1.18534705686654e-04f,
                                    2.26843463243900e-03f, 4.89352518554385e-03f};
  const float c = clamp_keeping_nan(x, -kClamp, kClamp);
  const float c2 = c * c;
  const float numerator = c * horner(c2, kNumerator);
  const float q = horner(c2, kDenominator);
  const float quotient = numerator / q;  // computed for every x: a branch stops vectorisation
  const float abs_x = std::fabs(x);
  const float ratio = abs_x < 0.0004f ? x : quotient;
  return abs_x >= 20.0f ? std::copysign(1.0f, x) : ratio;
}

// exp(x) = z * 2^n as two factors, after xla/backends/cpu/codegen/polynomial_approximations.cc
// GenerateVF32Exp (Cephes' polynomial; ln 2 split into a 16-bit high part and a low part):
//   c = x clamped to [-87.8, 88.8];  n = floor(c * log2(e) + 0.5) clamped to [-127, 128]
//   a = c - n * ln2_hi - n * ln2_lo;  z = 1 + (a + a^2 * P(a))
//   result = (z with its exponent raised by n - 127 when n = 128) * 2^min(n, 127),
//   2^-127 being built as 0 (XLA flushes subnormal results).
// Fused, as LLVM fuses each fmul with its only user: c * log2(e) + 0.5, both `- n * ln2`
// subtractions, the five Horner steps and `P * a^2 + a`. Rounded alone: a^2, 1 + ... and the
// final product (see logistic_one for the add that follows it there).
struct ExpFactors {
  float mantissa;  // z, its exponent already raised when n = 128
  float power;     // 2^min(n, 127), or 0 when n = -127
};

XLA_MATH_INLINE ExpFactors exp_factors(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;     // 0x1.62e4p-1: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.4286067653301877e-6f;  // 0x1.7f7d1cp-20
  constexpr float kP[] = {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                          4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f};
  const float c = clamp_keeping_nan(x, -87.8f, 88.8f);
  const float n = clamp_keeping_nan(std::floor(std::fma(c, kLog2e, 0.5f)), -127.0f, 128.0f);
  float a = std::fma(-kLn2Hi, n, c);
  a = std::fma(-kLn2Lo, n, a);
  const float p = horner(a, kP);
  const float z = 1.0f + std::fma(p, a * a, a);
  // A NaN n leaves z NaN; take n = 0 for the exponent arithmetic (XLA freezes the poison).
  const auto n_int = static_cast<int32_t>(n == n ? n : 0.0f);
  const uint32_t biased = static_cast<uint32_t>(n_int + 127) << 23;
  const uint32_t power_bits = biased < 0x7f000000u ? biased : 0x7f000000u;
  return {float_of(bits_of(z) + (biased - power_bits)), float_of(power_bits)};
}

XLA_MATH_INLINE float exp_one(float x) {
  const ExpFactors e = exp_factors(x);
  return e.mantissa * e.power;
}

// logistic(x) = 1 / (1 + exp(-x)), the HLO XLA's LogisticExpander writes (divide(1, add(1,
// exp(negate(x))))). In the fused loop exp's final fmul has the add as its only user, so LLVM
// fuses them: 1 + z * 2^n is one fma. (The product is exact unless it is subnormal, so this only
// matters in principle.)
XLA_MATH_INLINE float logistic_one(float x) {
  const ExpFactors e = exp_factors(-x);
  return 1.0f / std::fma(e.mantissa, e.power, 1.0f);
}

bool has_avx2_fma() { return ops::cpu_isa().avx2 && ops::cpu_isa().fma; }

#undef XLA_MATH_INLINE

// One loop per function and build; `fn` is inlined into each.
#define XLA_MATH_BLOCK_FUNCTION(name, fn)                                                   \
  __attribute__((target("avx2,fma"))) void name##_avx2_fma(const float* in, float* out,    \
                                                            size_t n) {                     \
    for (size_t i = 0; i < n; ++i) out[i] = fn(in[i]);                                      \
  }                                                                                         \
  void name##_baseline(const float* in, float* out, size_t n) {                             \
    for (size_t i = 0; i < n; ++i) out[i] = fn(in[i]);                                      \
  }

XLA_MATH_BLOCK_FUNCTION(tanh, tanh_one)
XLA_MATH_BLOCK_FUNCTION(exp, exp_one)
XLA_MATH_BLOCK_FUNCTION(logistic, logistic_one)

#undef XLA_MATH_BLOCK_FUNCTION

}  // namespace

void tanh_f32(const float* in, float* out, size_t n) {
  (has_avx2_fma() ? tanh_avx2_fma : tanh_baseline)(in, out, n);
}

void exp_f32(const float* in, float* out, size_t n) {
  (has_avx2_fma() ? exp_avx2_fma : exp_baseline)(in, out, n);
}

void logistic_f32(const float* in, float* out, size_t n) {
  (has_avx2_fma() ? logistic_avx2_fma : logistic_baseline)(in, out, n);
}

}  // namespace pmap_engine::xla_math
