// pmap_engine::random: JAX's jax.random with the default threefry2x32 implementation, on the
// host, bit for bit. docs/rng.md explains the key layout, split/fold_in and the partitionable
// flag for users; the sources it models are
//   jax/_src/random/threefry2x32.py  (threefry_seed, threefry_2x32, split, fold_in, random_bits)
//   jax/_src/random/prng.py          (random_seed, iota_2x32_shape)
//   jax/_src/random/core.py          (PRNGKey, uniform, normal)
//   stablehlo/transforms/ChloLegalizeToStablehlo.cpp (erfInv32, how chlo.erf_inv is lowered)
// of jax-ml/jax 0.11.1 (commit cec06d1) and openxla/stablehlo (commit 3c9301c).
//
// Vocabulary (used the same way in every function below):
//   key      two uint32 words. JAX prints a key's data as [hi, lo]: PRNGKey(42) is [0, 42], the
//            high and low 32 bits of the seed. `hi` is threefry's key word 0, `lo` key word 1.
//   counter  the two uint32 words one threefry block hashes (the "plaintext"): [c0, c1].
//   block    threefry2x32(key, counter): 20 rounds that turn one counter into two output words.
//   partitionable  JAX's config flag jax_threefry_partitionable. It picks how split and
//            random_bits lay out their counters (see split() and random_bits()); fold_in, the
//            hash itself and the key from a seed do not depend on it.
// Every array is row-major; a shape is a list of non-negative dimensions ({} is a scalar).
// Functions throw std::invalid_argument for a negative dimension or a negative split count.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pmap_engine::random {

struct Key {
  uint32_t hi = 0;  // key_data[0]: threefry key word 0; the seed's high 32 bits
  uint32_t lo = 0;  // key_data[1]: threefry key word 1; the seed's low 32 bits
};
inline bool operator==(Key a, Key b) { return a.hi == b.hi && a.lo == b.lo; }
inline bool operator!=(Key a, Key b) { return !(a == b); }

using Shape = std::vector<int64_t>;

// JAX's current default for jax_threefry_partitionable: true since jax 0.5.0 (see prng.cpp's
// citation of jax/_src/config.py and CHANGELOG.md).
bool default_partitionable();

// ---- threefry.cpp: the hash -------------------------------------------------------------------

// One block: Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11), as JAX's _threefry2x32_lowering computes it.
std::array<uint32_t, 2> threefry2x32(Key key, std::array<uint32_t, 2> counter);

// JAX's threefry_2x32(keypair, count) over a flat array of counts: the array (padded with one 0
// when its length is odd) is cut into halves, counts[j] and counts[half + j] form block j's
// counter, and the result is every block's word 0, then every block's word 1, padding dropped.
// Output length == counts.size().
std::vector<uint32_t> threefry_2x32(Key key, const std::vector<uint32_t>& counts);

// ---- prng.cpp: keys and samplers --------------------------------------------------------------

// jax.random.PRNGKey(seed) / key_data(jax.random.key(seed)) for a Python int seed. JAX first
// makes it an int64 (np.int64(seed)); then
//   enable_x64 = false (JAX's default): the int64 is canonicalised to int32 (wrapping), so the
//     key is [0, seed mod 2^32]: PRNGKey(-1) = [0, 4294967295].
//   enable_x64 = true: the key is the int64's two's-complement halves:
//     PRNGKey(-1) = [4294967295, 4294967295], PRNGKey(2^32 + 5) = [1, 5].
// Seeds in [0, 2^31) give the same key either way. (Python ints outside int64 make JAX raise
// OverflowError; they cannot reach this signature.)
Key prng_key(int64_t seed, bool enable_x64 = false);

// jax.random.split(key, num): num new keys.
//   partitionable = true:  key i = threefry2x32(key, [i >> 32, i & 0xffffffff]), so
//                          split(key, n)[i] == fold_in(key, i).
//   partitionable = false: the 2*num counts 0..2*num-1 go through threefry_2x32 and the output
//                          is read as num consecutive pairs.
std::vector<Key> split(Key key, int64_t num, bool partitionable);

// jax.random.fold_in(key, data): threefry2x32(key, [0, data]); the same under both flags.
Key fold_in(Key key, uint32_t data);

// jax.random.bits(key, shape, uint32): shape_num_elements(shape) words, row-major.
//   partitionable = true:  element i = word0 ^ word1 of threefry2x32(key, [i >> 32, i & ~0u]).
//   partitionable = false: threefry_2x32(key, [0, 1, ..., n-1]) (in blocks of 2^32-1 counts under
//                          keys from split() when n is larger, as JAX does).
std::vector<uint32_t> random_bits(Key key, const Shape& shape, bool partitionable);

// jax.random.uniform(key, shape, float32, minval, maxval): the top 23 bits of random_bits as
// a mantissa of a float in [1, 2), minus 1, then floats * (maxval - minval) + minval, clamped
// below at minval. Values lie in [minval, maxval) up to the rounding of that last step.
std::vector<float> uniform(Key key, const Shape& shape, float minval, float maxval,
                           bool partitionable);

// jax.random.normal(key, shape, float32): float32(sqrt(2)) * erf_inv(u) with u =
// uniform(key, shape, nextafter(-1, 0), 1): u lies in the open interval (-1, 1).
std::vector<float> normal(Key key, const Shape& shape, bool partitionable);

// jax.random.truncated_normal(key, lower, upper, shape, float32) (jax/_src/random/core.py
// _truncated_normal): u = uniform(key, shape, erf(lower / sqrt2), erf(upper / sqrt2)), then
// sqrt2 * erf_inv(u) clamped to the open interval (lower, upper) by nextafter.
std::vector<float> truncated_normal(Key key, float lower, float upper, const Shape& shape,
                                    bool partitionable);

// lax.erf for float32 as XLA:CPU computes it when it runs the op (xla/codegen/intrinsic/erf.cc,
// EmitErfF32: Eigen's rational interpolant x P(x^2) / Q(x^2) evaluated with fused multiply-adds,
// and +-1 from |x| >= 3.8325069). A jitted erf of a constant is folded by XLA's evaluator with
// std::erf instead, which can differ in the last bit.
float erf(float x);

// lax.erf_inv for float32 as XLA computes it on the CPU: StableHLO's erfInv32 (M. Giles'
// single-precision approximation, a degree-8 polynomial in w = -log1p(-x*x)) with XLA's
// log1p. erf_inv(+-1) = +-inf; |x| > 1 gives NaN.
float erf_inv(float x);

// Elements of a shape; throws std::invalid_argument for a negative dimension and
// std::length_error when the count does not fit in size_t.
size_t num_elements(const Shape& shape);

}  // namespace pmap_engine::random
