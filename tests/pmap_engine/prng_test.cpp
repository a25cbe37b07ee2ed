// jax.random on the host: keys, split, fold_in, bits, uniform and normal under both settings of
// jax_threefry_partitionable, against values JAX itself printed.
//
// Provenance of the golden values (no JAX runs here; every value is copied from a file that
// recorded JAX's output, named next to it):
//   [random_test]  jax-ml/jax tests/random_test.py (jax 0.11.1, commit cec06d1).
//   [flip]         jax-ml/jax commit a60ead6 "enable partitionable threefry by default"
//                  (2025-01-13): it rewrote doctest outputs, so its diff holds the same call's
//                  output under both settings ("-" lines: partitionable=false, "+": true).
//   [gotchas]      jax-ml/jax docs/notebooks/Common_Gotchas_in_JAX.ipynb as of commit
//                  225a2a5^ (the cells were removed in 225a2a5, 2024-11-15; JAX's default was
//                  still partitionable=false then). numpy prints float32 with up to 8 digits.
//   [back_compat]  jax-ml/jax jax/_src/internal_test_util/export_back_compat_test_data/
//                  cuda_threefry2x32.py data_2024_07_30, run by tests/export_back_compat_test.py
//                  test_cuda_threefry2x32 under threefry_partitionable(False).
//   [tensorrt]     NVIDIA/TensorRT-Incubator mlir-tensorrt/integrations/PJRT/test/JAX/
//                  test_random.py (commit f53b1db): a third party's record of JAX's output under
//                  the current default (partitionable=true).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "pmap_engine/random.h"
#include "random_test_util.h"

namespace pr = pmap_engine::random;

namespace {

using pmap_engine::testing::key_words;

constexpr bool kPartitionable = true;
constexpr bool kOriginal = false;
constexpr double kPi = 3.14159265358979323846;

// Checks float32 values against the text JAX printed for them. NumPy's default array printing
// (precision=8, floatmode="maxprec") prints a float32 either as its shortest round-tripping
// digits when those have at most 8 digits after the point, or rounded to 8 digits after the
// point (trailing zeros dropped). So the printed text must read back as exactly the value, or
// lie within 0.5e-8 of it. Text with more than 8 digits after the point was printed in full
// and must read back exactly. For values above ~0.1 either check catches a one-ulp difference.
void expect_printed(const std::vector<float>& actual, const std::vector<std::string>& printed) {
  ASSERT_EQ(actual.size(), printed.size());
  int reported = 0;
  for (size_t i = 0; i < actual.size() && reported < 5; ++i) {
    const std::string& text = printed[i];
    const size_t point = text.find('.');
    const size_t fraction_digits = point == std::string::npos ? 0 : text.size() - point - 1;
    const double value = std::strtod(text.c_str(), nullptr);
    const bool reads_back = actual[i] == static_cast<float>(value);
    const bool within_rounding =
        fraction_digits <= 8 && std::fabs(static_cast<double>(actual[i]) - value) <= 0.5e-8;
    const bool ok = reads_back || within_rounding;
    if (!ok) {
      ADD_FAILURE() << "index " << i << ": got " << std::setprecision(9) << actual[i]
                    << ", JAX printed " << text;
      ++reported;
    }
  }
}

// |actual - expected| <= tolerance for values JAX printed rounded to a few decimals.
void expect_floats_near(const std::vector<float>& actual, const std::vector<double>& expected,
                        double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "index " << i;
  }
}

// ---- default flag, keys from seeds --------------------------------------------------------------

TEST(Prng, DefaultPartitionableIsJaxDefault) {
  // jax/_src/config.py: threefry_partitionable default=True since jax 0.5.0 ([flip]).
  EXPECT_TRUE(pr::default_partitionable());
}

TEST(PrngKey, MatchesJaxSeedsAndKeys) {
  // [random_test] PrngTest.test_prng_seeds_and_keys, the `typ: int` rows (a Python int seed),
  // with jax_enable_x64 off and on.
  struct Row {
    int64_t seed;
    pr::Key x32;
    pr::Key x64;
  };
  const int64_t int32_max = std::numeric_limits<int32_t>::max();
  const int64_t int32_min = std::numeric_limits<int32_t>::min();
  const Row rows[] = {
      {0, {0, 0}, {0, 0}},
      {1, {0, 1}, {0, 1}},
      {3, {0, 3}, {0, 3}},
      {-1, {0, 4294967295u}, {4294967295u, 4294967295u}},
      {-2, {0, 4294967294u}, {4294967295u, 4294967294u}},
      {-3, {0, 4294967293u}, {4294967295u, 4294967293u}},
      {int32_max + 100, {0, 2147483747u}, {0, 2147483747u}},
      {int32_min - 100, {0, 2147483548u}, {4294967295u, 2147483548u}},
      {int32_min - 101, {0, 2147483547u}, {4294967295u, 2147483547u}},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(pr::prng_key(row.seed), row.x32) << "seed " << row.seed;
    EXPECT_EQ(pr::prng_key(row.seed, /*enable_x64=*/true), row.x64) << "seed " << row.seed;
  }
  // PRNGKey(42) prints as [0, 42]: hi first.
  EXPECT_EQ(pr::prng_key(42), (pr::Key{0, 42}));
  // Seeds past 32 bits: x64 keeps the high word, x32 keeps only the low word.
  const int64_t big = (int64_t{1} << 32) + 5;
  EXPECT_EQ(pr::prng_key(big), (pr::Key{0, 5}));
  EXPECT_EQ(pr::prng_key(big, true), (pr::Key{1, 5}));
}

// ---- split and fold_in ------------------------------------------------------------------------

TEST(Split, OriginalMatchesJaxPrngValues) {
  // [random_test] PrngTest.testPRNGValues (runs only with partitionable=false):
  // key_data(split(PRNGKey(0), 4)).
  const std::vector<uint32_t> expected = {2285895361, 1501764800, 1518642379, 4090693311,
                                          433833334,  4221794875, 839183663,  3740430601};
  EXPECT_EQ(key_words(pr::split(pr::prng_key(0), 4, kOriginal)), expected);
}

TEST(Split, OriginalMatchesGotchasNotebookChain) {
  // [gotchas] key = key(0); key, subkey = split(key) twice, then key, *subkeys = split(key, 4).
  const auto first = pr::split(pr::prng_key(0), 2, kOriginal);
  EXPECT_EQ(key_words(first), (std::vector<uint32_t>{4146024105, 967050713, 2718843009,
                                                     1272950319}));
  const auto second = pr::split(first[0], 2, kOriginal);
  EXPECT_EQ(key_words(second), (std::vector<uint32_t>{2384771982, 3928867769, 1278412471,
                                                      2182328957}));
}

TEST(Split, PartitionableIsFoldInOfIndex) {
  // [random_test] PrngTest.test_threefry_split_fold_in_symmetry (partitionable only):
  // split(key(72), 3)[i] == fold_in(key(72), i).
  const pr::Key key = pr::prng_key(72);
  const auto keys = pr::split(key, 3, kPartitionable);
  ASSERT_EQ(keys.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(keys[i], pr::fold_in(key, i)) << "i " << i;
  // The original layout does not have this symmetry (jax-ml/jax issue #7708).
  EXPECT_NE(pr::split(key, 3, kOriginal)[0], pr::fold_in(key, 0));
}

TEST(Split, PartitionableMatchesRecordedKeys) {
  // split(PRNGKey(0))[0] is the block of counter [0, 0] under key [0, 0]: Random123's first
  // known answer (threefry_test.cpp).
  const auto keys0 = pr::split(pr::prng_key(0), 2, kPartitionable);
  EXPECT_EQ(key_words(keys0),
            (std::vector<uint32_t>{0x6b200159, 0x99ba4efe, 928981903, 3453687069}));
  // [tensorrt] expected_values: split(PRNGKey(seed)) for seeds 0, 1, 2.
  EXPECT_EQ(key_words(pr::split(pr::prng_key(0), 2, kPartitionable)),
            (std::vector<uint32_t>{1797259609, 2579123966, 928981903, 3453687069}));
  EXPECT_EQ(key_words(pr::split(pr::prng_key(1), 2, kPartitionable)),
            (std::vector<uint32_t>{507451445, 1853169794, 1948878966, 4237131848}));
  EXPECT_EQ(key_words(pr::split(pr::prng_key(2), 2, kPartitionable)),
            (std::vector<uint32_t>{1821159224, 3364244817, 637334850, 3278974502}));
}

TEST(Split, EdgeCounts) {
  const pr::Key key = pr::prng_key(7);
  for (bool partitionable : {kOriginal, kPartitionable}) {
    EXPECT_TRUE(pr::split(key, 0, partitionable).empty());
    EXPECT_EQ(pr::split(key, 1, partitionable).size(), 1u);
    EXPECT_THROW(pr::split(key, -1, partitionable), std::invalid_argument);
  }
  // Original layout with num = 1: counts [0, 1] are one block.
  const auto block = pr::threefry2x32(key, {0, 1});
  EXPECT_EQ(pr::split(key, 1, kOriginal)[0], (pr::Key{block[0], block[1]}));
}

TEST(FoldIn, MatchesJaxPrngValues) {
  // [random_test] PrngTest.testPRNGValues: key_data(fold_in(PRNGKey(0), 4)). fold_in does not
  // depend on the flag, and equals the block of counter [0, data].
  EXPECT_EQ(pr::fold_in(pr::prng_key(0), 4), (pr::Key{2285895361, 433833334}));
  const auto block = pr::threefry2x32(pr::prng_key(0), {0, 4});
  EXPECT_EQ(pr::fold_in(pr::prng_key(0), 4), (pr::Key{block[0], block[1]}));
}

// ---- random bits ------------------------------------------------------------------------------

TEST(RandomBits, OriginalMatchesJax) {
  // [random_test] PrngTest.testRngRandomBits (partitionable=false): bits(PRNGKey(1701), (3,)).
  EXPECT_EQ(pr::random_bits(pr::prng_key(1701), {3}, kOriginal),
            (std::vector<uint32_t>{56197195, 4200222568, 961309823}));
  // [random_test] _RANDOM_VALUES_CASES "bits" uint32, seed adler32("bitsthreefry2x32") =
  // 942802475 (added in jax-ml/jax ea33892 for testRandomDistributionValues, which ran with
  // partitionable=false; at jax 0.11.1 its two skip conditions together skip it always).
  EXPECT_EQ(pr::random_bits(pr::prng_key(942802475), {5}, kOriginal),
            (std::vector<uint32_t>{1978747883, 4134381225, 3628107870, 689687174, 2788938207}));
}

TEST(RandomBits, OriginalIsThreefryOverIota) {
  // _threefry_random_bits_original: threefry_2x32(key, iota(n)) for n below 2^32 - 1.
  const pr::Key key = pr::prng_key(1701);
  for (int64_t n : {0, 1, 2, 3, 4, 5, 8, 13}) {
    std::vector<uint32_t> iota(static_cast<size_t>(n));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<uint32_t>(i);
    EXPECT_EQ(pr::random_bits(key, {n}, kOriginal), pr::threefry_2x32(key, iota)) << "n " << n;
  }
}

TEST(RandomBits, PartitionableElementIsXorOfItsBlock) {
  const pr::Key key = pr::prng_key(1701);
  const auto bits = pr::random_bits(key, {2, 3}, kPartitionable);
  ASSERT_EQ(bits.size(), 6u);
  for (uint32_t i = 0; i < 6; ++i) {
    const auto block = pr::threefry2x32(key, {0, i});
    EXPECT_EQ(bits[i], block[0] ^ block[1]) << "index " << i;
  }
}

TEST(RandomBits, ShapeDependenceDiffersBetweenLayouts) {
  const pr::Key key = pr::prng_key(3);
  // Partitionable: element i depends only on i, so shapes with the same row-major order and
  // longer arrays share a prefix; a scalar is element 0.
  const auto flat = pr::random_bits(key, {6}, kPartitionable);
  EXPECT_EQ(pr::random_bits(key, {2, 3}, kPartitionable), flat);
  const auto longer = pr::random_bits(key, {10}, kPartitionable);
  EXPECT_TRUE(std::equal(flat.begin(), flat.end(), longer.begin()));
  EXPECT_EQ(pr::random_bits(key, {}, kPartitionable), std::vector<uint32_t>{flat[0]});
  // Original: element i shares a block with element i + ceil(n/2), so the prefix changes.
  const auto flat_original = pr::random_bits(key, {6}, kOriginal);
  EXPECT_EQ(pr::random_bits(key, {2, 3}, kOriginal), flat_original);
  const auto longer_original = pr::random_bits(key, {10}, kOriginal);
  EXPECT_FALSE(std::equal(flat_original.begin(), flat_original.end(), longer_original.begin()));
}

TEST(RandomBits, EmptyAndBadShapes) {
  const pr::Key key = pr::prng_key(0);
  for (bool partitionable : {kOriginal, kPartitionable}) {
    EXPECT_TRUE(pr::random_bits(key, {0}, partitionable).empty());
    EXPECT_TRUE(pr::random_bits(key, {3, 0, 2}, partitionable).empty());
    EXPECT_EQ(pr::random_bits(key, {}, partitionable).size(), 1u);
    EXPECT_THROW(pr::random_bits(key, {2, -1}, partitionable), std::invalid_argument);
  }
}

// ---- uniform ----------------------------------------------------------------------------------

TEST(Uniform, PartitionableMatchesJaxDocs) {
  // [flip] jax/random.py module docstring and docs/jep/9263-typed-keys.md ("+" lines):
  //   uniform(key(0)) -> 0.947667; uniform(key(0), (3,)) -> [0.947667, 0.9785799, 0.33229148];
  //   key, subkey = split(key(0)); uniform(subkey) -> 0.00729382.
  const pr::Key key = pr::prng_key(0);
  expect_printed(pr::uniform(key, {}, 0.0f, 1.0f, kPartitionable), {"0.947667"});
  expect_printed(pr::uniform(key, {3}, 0.0f, 1.0f, kPartitionable),
                      {"0.947667", "0.9785799", "0.33229148"});
  const pr::Key subkey = pr::split(key, 2, kPartitionable)[1];
  expect_printed(pr::uniform(subkey, {}, 0.0f, 1.0f, kPartitionable), {"0.00729382"});
}

TEST(Uniform, OriginalMatchesJaxDocs) {
  // [flip] the same calls' "-" lines (partitionable=false):
  //   uniform(key(0)) -> 0.41845703; uniform(key(0), (3,)) -> [0.9653214, 0.31468165,
  //   0.63302994]; uniform(split(key(0))[1]) -> 0.10536897.
  const pr::Key key = pr::prng_key(0);
  expect_printed(pr::uniform(key, {}, 0.0f, 1.0f, kOriginal), {"0.41845703"});
  expect_printed(pr::uniform(key, {3}, 0.0f, 1.0f, kOriginal),
                      {"0.9653214", "0.31468165", "0.63302994"});
  const pr::Key subkey = pr::split(key, 2, kOriginal)[1];
  expect_printed(pr::uniform(subkey, {}, 0.0f, 1.0f, kOriginal), {"0.10536897"});
}

TEST(Uniform, OriginalMatchesExportBackCompatData) {
  // [back_compat] inputs: raw key data [42, 43]; func: uniform(x, (2, 4), float32).
  expect_printed(pr::uniform({42, 43}, {2, 4}, 0.0f, 1.0f, kOriginal),
                      {"0.42591238", "0.076994896", "0.44370103", "0.72904015", "0.17879379", "0.81439507", "0.0019190311", "0.68608475"});
}

TEST(Uniform, OriginalMatchesRandomValuesCase) {
  // [random_test] _RANDOM_VALUES_CASES "uniform" float32 (5,), seed adler32("uniformthreefry2x32")
  // = 1338574713, printed to 6 decimals.
  expect_floats_near(pr::uniform(pr::prng_key(1338574713), {5}, 0.0f, 1.0f, kOriginal),
                     {0.298671, 0.073213, 0.873356, 0.260549, 0.412797}, 1e-6);
}

TEST(Uniform, MinvalMaxvalMatchJaxDocs) {
  // [flip] jax/_src/numpy/lax_numpy.py trunc and fix docstrings, printed with precision=2:
  //   trunc: uniform(key(42), (3, 3), minval=-10, maxval=10)
  //   fix:   uniform(key(0), (3, 3), minval=-5, maxval=5)
  const double tolerance = 0.005 + 1e-6;
  expect_floats_near(pr::uniform(pr::prng_key(42), {3, 3}, -10.0f, 10.0f, kPartitionable),
                     {-0.23, 3.6, 2.33, 1.22, -0.99, 1.72, -8.5, 5.5, 3.98}, tolerance);
  expect_floats_near(pr::uniform(pr::prng_key(42), {3, 3}, -10.0f, 10.0f, kOriginal),
                     {2.88, -3.55, -6.13, 7.73, 4.49, -6.16, -3.1, -4.95, 2.64}, tolerance);
  expect_floats_near(pr::uniform(pr::prng_key(0), {3, 3}, -5.0f, 5.0f, kPartitionable),
                     {4.48, 4.79, -1.68, -0.31, 0.7, -3.34, -1.9, 1.89, 2.47}, tolerance);
  expect_floats_near(pr::uniform(pr::prng_key(0), {3, 3}, -5.0f, 5.0f, kOriginal),
                     {-1.45, 1.04, -0.72, -2.69, 1.74, -0.6, -2.49, -2.23, 2.68}, tolerance);
}

TEST(Uniform, PartitionableMatchesTensorRtRecord) {
  // [tensorrt] key1, key2 = split(PRNGKey(0)); uniform(key2, shape=(4, 4)).
  const pr::Key key2 = pr::split(pr::prng_key(0), 2, kPartitionable)[1];
  expect_printed(pr::uniform(key2, {4, 4}, 0.0f, 1.0f, kPartitionable),
                      {"0.00729382", "0.02089119", "0.5814265", "0.36183798", "0.22303772", "0.11928833", "0.12543893", "0.61683", "0.0950073", "0.9834225", "0.4248221", "0.8324801", "0.0966121", "0.22702086", "0.3545748", "0.67104137"});
}

TEST(Uniform, StaysInRange) {
  for (bool partitionable : {kOriginal, kPartitionable}) {
    const auto values = pr::uniform(pr::prng_key(5), {100000}, -2.0f, 3.0f, partitionable);
    double sum = 0.0;
    for (float value : values) {
      ASSERT_GE(value, -2.0f);
      ASSERT_LT(value, 3.0f);
      sum += value;
    }
    EXPECT_NEAR(sum / static_cast<double>(values.size()), 0.5, 0.02);
    // The unit interval is [0, 1) in steps of 2^-23.
    for (float value : pr::uniform(pr::prng_key(6), {1000}, 0.0f, 1.0f, partitionable)) {
      ASSERT_GE(value, 0.0f);
      ASSERT_LT(value, 1.0f);
      const float scaled = value * 8388608.0f;
      ASSERT_EQ(scaled, std::floor(scaled));
    }
  }
}

// ---- normal and erf_inv -----------------------------------------------------------------------

TEST(Normal, OriginalMatchesGotchasNotebook) {
  // [gotchas] normal(key, shape=(1,)) for the notebook's keys: key(0), then the subkeys of the
  // split chain (split keys checked in Split.OriginalMatchesGotchasNotebookChain).
  const pr::Key key0 = pr::prng_key(0);
  expect_printed(pr::normal(key0, {1}, kOriginal), {"-0.20584226"});
  const auto first = pr::split(key0, 2, kOriginal);
  expect_printed(pr::normal(first[1], {1}, kOriginal), {"-1.2515389"});
  const auto second = pr::split(first[0], 2, kOriginal);
  expect_printed(pr::normal(second[1], {1}, kOriginal), {"-0.58665055"});
  const auto four = pr::split(second[0], 4, kOriginal);
  expect_printed(pr::normal(four[1], {1}, kOriginal), {"-0.37533438"});
  expect_printed(pr::normal(four[2], {1}, kOriginal), {"0.98645043"});
  expect_printed(pr::normal(four[3], {1}, kOriginal), {"0.14553197"});
}

TEST(Normal, OriginalMatchesRandomValuesCase) {
  // [random_test] _RANDOM_VALUES_CASES "normal" float32 (5,), seed adler32("normalthreefry2x32")
  // = 1193674498, printed to 6 decimals.
  expect_floats_near(pr::normal(pr::prng_key(1193674498), {5}, kOriginal),
                     {-1.173234, -1.511662, 0.070593, -0.099764, 1.052845}, 1e-6);
}

TEST(Normal, PartitionableMatchesTensorRtRecord) {
  // [tensorrt] key1, key2 = split(PRNGKey(0)); normal(key1, shape=(4, 4)).
  const pr::Key key1 = pr::split(pr::prng_key(0), 2, kPartitionable)[0];
  expect_printed(pr::normal(key1, {4, 4}, kPartitionable),
                      {"1.0040143", "-0.9063372", "-0.7481722", "-1.1713669", "-0.8712328", "0.58883816", "0.72392994", "-1.0255982", "1.661628", "-1.8910251", "-1.2889339", "0.13360691", "-1.1530392", "0.23929629", "1.7448071", "0.5050189"});
}

TEST(Normal, IsSqrt2TimesErfInvOfOpenUniform) {
  // jax/_src/random/core.py _normal_real, recomputed from its parts.
  const float lo = std::nextafter(-1.0f, 0.0f);
  const auto sqrt2 = static_cast<float>(std::sqrt(2.0));
  for (bool partitionable : {kOriginal, kPartitionable}) {
    const pr::Key key = pr::prng_key(11);
    const auto u = pr::uniform(key, {257}, lo, 1.0f, partitionable);
    const auto z = pr::normal(key, {257}, partitionable);
    ASSERT_EQ(u.size(), z.size());
    for (size_t i = 0; i < u.size(); ++i) {
      ASSERT_GT(u[i], -1.0f);
      ASSERT_LT(u[i], 1.0f);
      ASSERT_EQ(z[i], sqrt2 * pr::erf_inv(u[i])) << "index " << i;
    }
  }
}

TEST(Normal, MomentsOf100kSamples) {
  for (bool partitionable : {kOriginal, kPartitionable}) {
    const auto z = pr::normal(pr::prng_key(2024), {100000}, partitionable);
    double sum = 0.0;
    double sum_squares = 0.0;
    for (float value : z) {
      ASSERT_TRUE(std::isfinite(value));
      sum += value;
      sum_squares += static_cast<double>(value) * value;
    }
    const double n = static_cast<double>(z.size());
    const double mean = sum / n;
    const double variance = sum_squares / n - mean * mean;
    // Standard errors: 1/sqrt(n) = 0.0032 for the mean, sqrt(2/n) = 0.0045 for the variance.
    EXPECT_NEAR(mean, 0.0, 0.016) << "partitionable " << partitionable;
    EXPECT_NEAR(variance, 1.0, 0.023) << "partitionable " << partitionable;
  }
}

TEST(ErfInv, SpecialValuesAndSymmetry) {
  EXPECT_EQ(pr::erf_inv(0.0f), 0.0f);
  EXPECT_EQ(pr::erf_inv(1.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(pr::erf_inv(-1.0f), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(pr::erf_inv(1.5f)));
  EXPECT_TRUE(std::isnan(pr::erf_inv(std::numeric_limits<float>::quiet_NaN())));
  for (float x : {1e-6f, 0.1f, 0.5f, 0.64f, 0.65f, 0.9f, 0.99f, 0.999999f}) {
    EXPECT_EQ(pr::erf_inv(-x), -pr::erf_inv(x)) << "x " << x;
  }
}

TEST(ErfInv, InvertsErfToFloatPrecision) {
  // Giles' single-precision approximation is accurate to a few float32 ulps; check
  // erf(erf_inv(x)) == x in double within a few ulps of x (and of the steep tail's slope).
  for (int i = -999; i <= 999; ++i) {
    const float x = static_cast<float>(i) / 1000.0f;
    const double y = pr::erf_inv(x);
    const double back = std::erf(y);
    const double slope = 2.0 / std::sqrt(kPi) * std::exp(-y * y);  // d erf / dy
    const double tolerance = 8.0 * std::numeric_limits<float>::epsilon() *
                             std::max(std::fabs(static_cast<double>(x)), slope * std::fabs(y));
    EXPECT_NEAR(back, x, tolerance + 1e-12) << "x " << x;
  }
}

}  // namespace
