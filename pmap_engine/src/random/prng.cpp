// Keys and samplers of jax.random on top of the threefry hash (threefry.cpp).
//
// Vocabulary (as in random.h and threefry.cpp): a key is [hi, lo]; a counter is the pair of
// words one block hashes; "the counter layout" is which counters a function feeds to the hash
// and how it reads the output words back. The two layouts, chosen by jax_threefry_partitionable:
//   partitionable (JAX >= 0.5.0 default): element i of an output of any shape gets its own block
//     with counter [i >> 32, i & 0xffffffff] (prng.iota_2x32_shape: a uint64 row-major iota as
//     two uint32 arrays). Element i never depends on the output's size, so a sharded array can
//     make its own elements without the others: that is what makes it partitionable.
//   original: the counts 0..n-1 go through threefry_2x32's halves layout (threefry.cpp), so
//     element i shares a block with element i +- ceil(n/2) and its value depends on n.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "pmap_engine/random.h"

// The float code below rounds each IEEE operation on its own (see normal()): forbid the compiler
// from contracting a * b + c into an FMA (GCC does by default in GNU modes on FMA targets; clang
// within one expression).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace pmap_engine::random {

bool default_partitionable() {
  // jax/_src/config.py (jax 0.11.1): threefry_partitionable = bool_state(
  //   name='jax_threefry_partitionable', default=True, upgrade=True, ...).
  // The default flipped from False to True in jax-ml/jax commit a60ead6 ("enable partitionable
  // threefry by default", 2025-01-13), released in jax 0.5.0 (CHANGELOG.md, "jax 0.5.0 (Jan 17,
  // 2025)": "Enable `jax_threefry_partitionable` by default").
  return true;
}

size_t num_elements(const Shape& shape) {
  size_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw std::invalid_argument("pmap_engine::random: shape dimension " + std::to_string(dim) +
                                  " is negative; dimensions must be >= 0");
    }
    const auto dim_count = static_cast<uint64_t>(dim);
    if (dim_count != 0 && count > std::numeric_limits<size_t>::max() / dim_count) {
      throw std::length_error("pmap_engine::random: shape has more elements than fit in size_t");
    }
    count *= static_cast<size_t>(dim_count);
  }
  return count;
}

namespace {

// threefry_2x32(key, [0, 1, ..., num_counts - 1]) written into out[0..num_counts), without
// materialising the counts. Counts are uint32 (lax.iota(np.uint32, n)).
void hash_iota(Key key, uint64_t num_counts, uint32_t* out) {
  const uint64_t half = (num_counts + 1) / 2;
  for (uint64_t j = 0; j < half; ++j) {
    const bool padded = half + j >= num_counts;
    const auto words = threefry2x32(
        key, {static_cast<uint32_t>(j), padded ? 0u : static_cast<uint32_t>(half + j)});
    out[j] = words[0];
    if (!padded) out[half + j] = words[1];
  }
}

// The partitionable counter of element `index`: the uint64 index as [high word, low word].
std::array<uint32_t, 2> index_counter(uint64_t index) {
  return {static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(index)};
}

std::vector<Key> split_original(Key key, uint64_t num) {
  // _threefry_split_original: threefry_2x32(key, iota(2 * num)) reshaped to (num, 2).
  std::vector<uint32_t> words(2 * num);
  hash_iota(key, 2 * num, words.data());
  std::vector<Key> keys(num);
  for (uint64_t i = 0; i < num; ++i) keys[i] = Key{words[2 * i], words[2 * i + 1]};
  return keys;
}

std::vector<uint32_t> random_bits_original(Key key, uint64_t num_words) {
  // _threefry_random_bits_original for bit_width 32: one threefry_2x32 over iota(n) while n fits
  // below 2^32 - 1 counts; otherwise blocks of 2^32 - 1 counts, each under its own key from
  // split(key, num_blocks + 1), the last key taking the remainder.
  constexpr uint64_t kMaxCounts = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> bits(num_words);
  const uint64_t num_blocks = num_words / kMaxCounts;
  const uint64_t remainder = num_words % kMaxCounts;
  if (num_blocks == 0) {
    hash_iota(key, remainder, bits.data());
    return bits;
  }
  const std::vector<Key> keys = split_original(key, num_blocks + 1);
  for (uint64_t block = 0; block < num_blocks; ++block) {
    hash_iota(keys[block], kMaxCounts, bits.data() + block * kMaxCounts);
  }
  hash_iota(keys[num_blocks], remainder, bits.data() + num_blocks * kMaxCounts);
  return bits;
}

// lax.max: NaN if either side is NaN, else the larger.
float max_propagating_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return a < b ? b : a;
}

}  // namespace

Key prng_key(int64_t seed, bool enable_x64) {
  // jax/_src/random/prng.py random_seed: a Python int becomes np.int64(seed), then jnp.asarray
  // canonicalises it to int32 unless jax_enable_x64 (wrapping: the low 32 bits survive).
  // jax/_src/random/threefry2x32.py _threefry_seed: k1 = uint32(seed >> 32 logical),
  // k2 = uint32(seed & 0xFFFFFFFF); key = [k1, k2]. For an int32 seed the shift by 32 is XLA's
  // out-of-range shift, which yields 0. tests/random_test.py test_prng_seeds_and_keys pins both.
  const auto bits = static_cast<uint64_t>(seed);
  if (!enable_x64) return Key{0, static_cast<uint32_t>(bits)};
  return Key{static_cast<uint32_t>(bits >> 32), static_cast<uint32_t>(bits)};
}

std::vector<Key> split(Key key, int64_t num, bool partitionable) {
  if (num < 0) {
    throw std::invalid_argument("pmap_engine::random::split: num is " + std::to_string(num) +
                                "; it must be >= 0");
  }
  const auto num_keys = static_cast<uint64_t>(num);
  if (!partitionable) return split_original(key, num_keys);
  // _threefry_split_foldlike: key i is the block of counter iota_2x32(i), both words.
  std::vector<Key> keys(num_keys);
  for (uint64_t i = 0; i < num_keys; ++i) {
    const auto words = threefry2x32(key, index_counter(i));
    keys[i] = Key{words[0], words[1]};
  }
  return keys;
}

Key fold_in(Key key, uint32_t data) {
  // _threefry_fold_in: threefry_2x32(key, threefry_seed(uint32 data)) = threefry_2x32(key,
  // [0, data]): two counts, so one block with counter [0, data], both words.
  const auto words = threefry2x32(key, {0u, data});
  return Key{words[0], words[1]};
}

std::vector<uint32_t> random_bits(Key key, const Shape& shape, bool partitionable) {
  const size_t count = num_elements(shape);
  if (!partitionable) return random_bits_original(key, count);
  // _threefry_random_bits_partitionable, bit_width 32: bits1 ^ bits2 of each element's block.
  std::vector<uint32_t> bits(count);
  for (size_t i = 0; i < count; ++i) {
    const auto words = threefry2x32(key, index_counter(i));
    bits[i] = words[0] ^ words[1];
  }
  return bits;
}

namespace {

// jax/_src/random/core.py _uniform for float32 (nbits 32, nmant 23), one element.
float uniform_from_bits(uint32_t bits, float minval, float range) {
  constexpr uint32_t kOneBits = 0x3F800000u;  // float32 1.0
  const uint32_t float_bits = (bits >> (32 - 23)) | kOneBits;
  float in_one_two;
  static_assert(sizeof(in_one_two) == sizeof(float_bits));
  std::memcpy(&in_one_two, &float_bits, sizeof(float_bits));
  const float floats = in_one_two - 1.0f;  // exact: [0, 1) in steps of 2^-23
  const float scaled = floats * range;
  const float value = scaled + minval;
  return max_propagating_nan(minval, value);
}

// log1p for float32 as XLA:CPU emits it (xla/codegen/intrinsic/log1p.cc, Log1p::CreateDefinition):
// for |x| < sqrt(2) - 1 a Cephes rational approximation,
//   x + (-0.5 * x^2 + x * x^2 * numerator(x) / denominator(x)),
// with both polynomials evaluated in float32 by Horner's rule from a zero start; otherwise
// log(x + 1). Every operation is rounded on its own (see the note on FMA at normal() below).
float log1p_like_xla(float x) {
  constexpr std::array<double, 7> kDenominatorCoeffs = {
      1.,
      1.5062909083469192043167E1,
      8.3047565967967209469434E1,
      2.2176239823732856465394E2,
      3.0909872225312059774938E2,
      2.1642788614495947685003E2,
      6.0118660497603843919306E1,
  };
  constexpr std::array<double, 7> kNumeratorCoeffs = {
      4.5270000862445199635215E-5, 4.9854102823193375972212E-1, 6.5787325942061044846969E0,
      2.9911919328553073277375E1,  6.0949667980987787057556E1,  5.7112963590585538103336E1,
      2.0039553499201281259648E1,
  };
  constexpr float kSmallThreshold = 0.41421356237309504880f;  // sqrt(2) - 1
  if (!(std::fabs(x) < kSmallThreshold)) return std::log(x + 1.0f);

  auto horner = [x](const std::array<double, 7>& coeffs) {
    float poly = 0.0f;
    for (double coeff : coeffs) {
      const float scaled = poly * x;
      poly = scaled + static_cast<float>(coeff);
    }
    return poly;
  };
  const float x_squared = x * x;
  const float ratio = horner(kNumeratorCoeffs) / horner(kDenominatorCoeffs);
  const float x_cubed = x * x_squared;
  const float cubic_term = x_cubed * ratio;
  const float quadratic_term = -0.5f * x_squared;
  const float correction = quadratic_term + cubic_term;
  return x + correction;
}

}  // namespace

float erf_inv(float x) {
  // stablehlo/transforms/ChloLegalizeToStablehlo.cpp erfInv32, the lowering of chlo.erf_inv that
  // lax.erf_inv emits (jax/_src/lax/special.py): M. Giles, "Approximating the erfinv function",
  // GPU Computing Gems Jade Edition (2011), single-precision version. The coefficients are the
  // float32 constants of that file (XLA's older xla/client/lib/math.cc ErfInv32 used the same).
  //   w = -log1p(-x * x)
  //   w < 5:  t = w - 2.5,     p = Horner(kCentralCoeffs, t)
  //   w >= 5: t = sqrt(w) - 3, p = Horner(kTailCoeffs, t)
  //   erf_inv(x) = p * x, and +-inf at x = +-1.
  constexpr std::array<float, 9> kCentralCoeffs = {
      2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f, -4.39150654e-06f, 0.00021858087f,
      -0.00125372503f, -0.00417768164f, 0.246640727f,    1.50140941f};
  constexpr std::array<float, 9> kTailCoeffs = {
      -0.000200214257f, 0.000100950558f, 0.00134934322f, -0.00367342844f, 0.00573950773f,
      -0.0076224613f,   0.00943887047f,  1.00167406f,    2.83297682f};
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();

  const float minus_x_squared = x * (-x);
  const float w = -log1p_like_xla(minus_x_squared);
  const bool central = w < 5.0f;
  const float t = central ? w - 2.5f : std::sqrt(w) - 3.0f;
  const auto& coeffs = central ? kCentralCoeffs : kTailCoeffs;
  float p = coeffs[0];
  for (size_t i = 1; i < coeffs.size(); ++i) {
    const float scaled = p * t;
    p = coeffs[i] + scaled;
  }
  return p * x;
}

std::vector<float> uniform(Key key, const Shape& shape, float minval, float maxval,
                           bool partitionable) {
  const std::vector<uint32_t> bits = random_bits(key, shape, partitionable);
  const float range = maxval - minval;  // float32, as JAX subtracts the converted bounds
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = uniform_from_bits(bits[i], minval, range);
  return values;
}

float erf(float x) {
  constexpr float kSaturatesAt = 3.832506856900711f;  // erf rounds to +-1 from here on
  constexpr std::array<float, 5> kNumerator = {0.00022905065861350646f, 0.0034082910107109506f,
                                               0.050955695062380861f, 0.18520832239976145f,
                                               1.128379143519084f};
  constexpr std::array<float, 7> kDenominator = {
      -1.1791602954361697e-7f, 0.000023547966471313185f, 0.0010179625278914885f,
      0.014070470171167667f,   0.11098505178285362f,     0.49746925110067538f,
      1.0f};
  const float x2 = x * x;
  // Horner steps as XLA emits them: each one a single llvm.fma (one rounding).
  const auto horner = [x2](const auto& coeffs) {
    float acc = coeffs[0];
    for (size_t i = 1; i < coeffs.size(); ++i) acc = std::fma(x2, acc, coeffs[i]);
    return acc;
  };
  if (kSaturatesAt <= std::fabs(x)) return std::copysign(1.0f, x);
  return (x * horner(kNumerator)) / horner(kDenominator);
}

std::vector<float> truncated_normal(Key key, float lower, float upper, const Shape& shape,
                                    bool partitionable) {
  const auto sqrt2 = static_cast<float>(std::sqrt(2.0));  // np.array(np.sqrt(2), float32)
  const float a = erf(lower / sqrt2);
  const float b = erf(upper / sqrt2);
  std::vector<float> values = uniform(key, shape, a, b, partitionable);
  const float low = std::nextafter(lower, std::numeric_limits<float>::infinity());
  const float high = std::nextafter(upper, -std::numeric_limits<float>::infinity());
  for (float& value : values) value = std::clamp(sqrt2 * erf_inv(value), low, high);
  return values;
}

std::vector<float> normal(Key key, const Shape& shape, bool partitionable) {
  // jax/_src/random/core.py _normal_real: u = uniform(key, shape, float32, lo, 1) with
  // lo = nextafter(-1, 0), then float32(sqrt(2)) * erf_inv(u). (maxval - minval rounds to
  // exactly 2, so u = floats * 2 + lo has a single rounding either way.)
  //
  // A note on FMA: XLA may fuse a multiply and an add into one FMA (its CPU compiler sets
  // llvm::FPOpFusion::Fast), which would change the last bit of the erf_inv polynomial. Every
  // normal value JAX printed that tests/pmap_engine/prng_test.cpp checks (22, both flags) is
  // reproduced exactly with each operation rounded on its own, while a fused Horner step misses
  // two of them, so this file rounds every operation separately.
  const float lo = std::nextafter(-1.0f, 0.0f);
  std::vector<float> values = uniform(key, shape, lo, 1.0f, partitionable);
  const auto sqrt2 = static_cast<float>(std::sqrt(2.0));  // np.array(np.sqrt(2), float32)
  for (float& value : values) value = sqrt2 * erf_inv(value);
  return values;
}

}  // namespace pmap_engine::random
