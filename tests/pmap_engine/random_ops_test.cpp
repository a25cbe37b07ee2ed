// jax.random on Array keys (random_ops.h): values equal the host module's (random.h) bit for bit,
// op by op and inside jit, under both settings of jax_threefry_partitionable; JAX's own vectors
// hold; bernoulli/dropout statistics and gradients; errors for key arrays and bad dtypes.
//
// JAX's values are the ones tests/pmap_engine/prng_test.cpp collected; its provenance tags are
// reused here:
//   [random_test]  jax-ml/jax tests/random_test.py (jax 0.11.1, commit cec06d1).
//   [flip]         jax-ml/jax commit a60ead6 (doctest outputs under both flag settings).
//   [tensorrt]     NVIDIA/TensorRT-Incubator mlir-tensorrt/integrations/PJRT/test/JAX/
//                  test_random.py (commit f53b1db), partitionable=true.
#include "pmap_engine/random_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gradient_check.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"
#include "random_test_util.h"

namespace pmap_engine {
namespace {

namespace pr = pmap_engine::random;
using pmap_engine::testing::expect_error_mentions;
using pmap_engine::testing::key_words;
using ::testing::HasSubstr;

constexpr bool kPartitionable = true;
constexpr bool kOriginal = false;

std::vector<uint32_t> words_of(const Array& array) {
  std::vector<uint32_t> words;
  for (int64_t value : array.to_ints()) words.push_back(static_cast<uint32_t>(value));
  return words;
}

void expect_printed(const std::vector<float>& actual, const std::vector<double>& printed) {
  ASSERT_EQ(actual.size(), printed.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    // Either the text is the value's shortest round-trip form, or it is rounded to 8 decimals.
    const bool reads_back = actual[i] == static_cast<float>(printed[i]);
    const bool within_rounding = std::fabs(static_cast<double>(actual[i]) - printed[i]) <= 0.5e-8;
    EXPECT_TRUE(reads_back || within_rounding) << "index " << i << ": " << actual[i];
  }
}

// ---- keys, split, fold_in ----------------------------------------------------------------------

TEST(RandomOpsKeys, KeyDataIsHiThenLo) {
  Array key = pr::prng_key_data(42);
  EXPECT_EQ(key.dtype(), DType::u32);
  EXPECT_EQ(key.shape(), (Shape{2}));
  EXPECT_EQ(words_of(key), (std::vector<uint32_t>{0, 42}));
  // enable_x64 keeps the seed's high word ([random_test] test_prng_seeds_and_keys, seed -1).
  EXPECT_EQ(words_of(pr::prng_key_data(-1, /*enable_x64=*/true)),
            (std::vector<uint32_t>{4294967295u, 4294967295u}));
  EXPECT_EQ(pr::key_from_data(pr::key_data(pr::Key{7, 9})), (pr::Key{7, 9}));
}

TEST(RandomOpsSplit, MatchesJaxUnderBothLayouts) {
  // [random_test] testPRNGValues (partitionable=false): key_data(split(PRNGKey(0), 4)).
  Array keys = pr::split(pr::prng_key_data(0), 4, kOriginal);
  EXPECT_EQ(keys.shape(), (Shape{4, 2}));
  EXPECT_EQ(words_of(keys), (std::vector<uint32_t>{2285895361, 1501764800, 1518642379, 4090693311,
                                                   433833334, 4221794875, 839183663, 3740430601}));
  // [tensorrt] split(PRNGKey(1)) under partitionable=true.
  EXPECT_EQ(words_of(pr::split(pr::prng_key_data(1), 2, kPartitionable)),
            (std::vector<uint32_t>{507451445, 1853169794, 1948878966, 4237131848}));
  // The default is JAX's default (partitionable) and num defaults to 2.
  EXPECT_EQ(words_of(pr::split(pr::prng_key_data(1))),
            words_of(pr::split(pr::prng_key_data(1), 2, kPartitionable)));
}

TEST(RandomOpsSplit, KeyAtTakesRowsLikeTheHostKeys) {
  const pr::Key host_key = pr::prng_key(72);
  for (bool partitionable : {kOriginal, kPartitionable}) {
    Array keys = pr::split(pr::key_data(host_key), 3, partitionable);
    std::vector<pr::Key> expected = pr::split(host_key, 3, partitionable);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(pr::key_from_data(pr::key_at(keys, i)), expected[static_cast<size_t>(i)]);
    }
    EXPECT_EQ(pr::key_from_data(pr::key_at(keys, -1)), expected[2]);
  }
  expect_error_mentions([&] { pr::key_at(pr::split(pr::key_data(host_key), 3), 3); },
                        {"key_at", "index 3", "3 keys"});
}

TEST(RandomOpsFoldIn, MatchesJaxForConcreteAndTracedData) {
  // [random_test] testPRNGValues: key_data(fold_in(PRNGKey(0), 4)).
  const std::vector<uint32_t> expected = {2285895361, 433833334};
  EXPECT_EQ(words_of(pr::fold_in(pr::prng_key_data(0), 4u)), expected);
  // Data as an i32 array traced inside a jit (as a device's axis_index would be).
  Jitted folded = jit([](const std::vector<Tree>& args) {
    return Tree(pr::fold_in(args[0].leaf(), args[1].leaf()));
  });
  EXPECT_EQ(words_of(folded({pr::prng_key_data(0), Array::from_ints({}, {4})}).leaf()), expected);
  // i32 -1 is u32 0xffffffff.
  EXPECT_EQ(words_of(pr::fold_in(pr::prng_key_data(3), Array::from_ints({}, {-1}))),
            key_words({pr::fold_in(pr::prng_key(3), 0xffffffffu)}));
}

// ---- samplers equal the host module, op by op and in jit ---------------------------------------

// Everything one key can give, as a tuple: split, fold_in, bits, uniform, normal.
Tree draw_everything(const Array& key, bool partitionable) {
  return Tree::tuple({pr::split(key, 3, partitionable), pr::fold_in(key, 11u),
                      pr::random_bits(key, {2, 3}, partitionable),
                      pr::uniform(key, {5}, -2.0, 3.0, DType::f32, partitionable),
                      pr::normal(key, {2, 2}, DType::f32, partitionable)});
}

void expect_equals_host(const Tree& drawn, pr::Key key, bool partitionable) {
  EXPECT_EQ(words_of(drawn[0].leaf()), key_words(pr::split(key, 3, partitionable)));
  EXPECT_EQ(words_of(drawn[1].leaf()), key_words({pr::fold_in(key, 11u)}));
  EXPECT_EQ(words_of(drawn[2].leaf()), pr::random_bits(key, {2, 3}, partitionable));
  EXPECT_EQ(drawn[2].leaf().shape(), (Shape{2, 3}));
  EXPECT_EQ(drawn[3].leaf().to_floats(), pr::uniform(key, {5}, -2.0f, 3.0f, partitionable));
  EXPECT_EQ(drawn[4].leaf().to_floats(), pr::normal(key, {2, 2}, partitionable));
  EXPECT_EQ(drawn[4].leaf().dtype(), DType::f32);
}

TEST(RandomOpsSamplers, EqualTheHostModuleOpByOpAndInsideJit) {
  const pr::Key key = pr::prng_key(1701);
  for (bool partitionable : {kOriginal, kPartitionable}) {
    SCOPED_TRACE(partitionable ? "partitionable" : "original");
    expect_equals_host(draw_everything(pr::key_data(key), partitionable), key, partitionable);
    Jitted jitted = jit([partitionable](const std::vector<Tree>& args) {
      return draw_everything(args[0].leaf(), partitionable);
    });
    expect_equals_host(jitted({pr::key_data(key)}), key, partitionable);
    // Under DisableJit too (jax.disable_jit()).
    DisableJit disabled;
    expect_equals_host(jitted({pr::key_data(key)}), key, partitionable);
  }
}

TEST(RandomOpsSamplers, MatchJaxsVectors) {
  // [random_test] testRngRandomBits (partitionable=false): bits(PRNGKey(1701), (3,)).
  EXPECT_EQ(words_of(pr::random_bits(pr::prng_key_data(1701), {3}, kOriginal)),
            (std::vector<uint32_t>{56197195, 4200222568, 961309823}));
  // [flip] uniform(key(0), (3,)) -> [0.947667, 0.9785799, 0.33229148] (partitionable) and
  // [0.9653214, 0.31468165, 0.63302994] (original). NumPy printed at most 8 decimals, so the
  // text reads back as the f32 value or lies within 0.5e-8 of it (see prng_test.cpp).
  expect_printed(
      pr::uniform(pr::prng_key_data(0), {3}, 0.0, 1.0, DType::f32, kPartitionable).to_floats(),
      {0.947667, 0.9785799, 0.33229148});
  expect_printed(
      pr::uniform(pr::prng_key_data(0), {3}, 0.0, 1.0, DType::f32, kOriginal).to_floats(),
      {0.9653214, 0.31468165, 0.63302994});
  // [tensorrt] key1, key2 = split(PRNGKey(0)); normal(key1, (4, 4))[0, :4].
  Array key1 = pr::key_at(pr::split(pr::prng_key_data(0), 2, kPartitionable), 0);
  std::vector<float> z = pr::normal(key1, {4, 4}, DType::f32, kPartitionable).to_floats();
  expect_printed({z.begin(), z.begin() + 4}, {1.0040143, -0.9063372, -0.7481722, -1.1713669});
}

TEST(RandomOpsSamplers, ProgramShowsThePrimitivesAndTheirParams) {
  TreeFunction f = [](const std::vector<Tree>& args) {
    return Tree(pr::uniform(pr::key_at(pr::split(args[0].leaf(), 2, kOriginal), 1), {3}));
  };
  std::string program = make_program(f, {pr::prng_key_data(0)});
  EXPECT_THAT(program, HasSubstr("random_split"));
  EXPECT_THAT(program, HasSubstr("partitionable=False"));
  EXPECT_THAT(program, HasSubstr("random_uniform"));
  EXPECT_THAT(program, HasSubstr("partitionable=True"));
}

// ---- bernoulli and dropout ---------------------------------------------------------------------

double overlap(const Array& a, const Array& b) {
  std::vector<int64_t> x = a.to_ints();
  std::vector<int64_t> y = b.to_ints();
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) same += x[i] == y[i];
  return static_cast<double>(same) / static_cast<double>(x.size());
}

TEST(RandomOpsBernoulli, IsUniformBelowPAndOverlapsAsIndependentMasks) {
  const double p = 0.3;
  const int64_t n = 100000;
  Array key = pr::prng_key_data(2024);
  Array mask = pr::bernoulli(key, p, {n});
  EXPECT_EQ(mask.dtype(), DType::bool_);
  // Exactly uniform(key) < float32(p).
  std::vector<float> u = pr::uniform(key, {n}).to_floats();
  std::vector<int64_t> bits = mask.to_ints();
  size_t num_true = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    ASSERT_EQ(bits[i] != 0, u[i] < static_cast<float>(p)) << "index " << i;
    num_true += bits[i] != 0;
  }
  // Mean: standard error sqrt(p (1-p) / n) = 0.0014.
  EXPECT_NEAR(static_cast<double>(num_true) / static_cast<double>(n), p, 0.01);
  // The same key gives the same mask; split keys give masks that agree where two
  // independent draws would: p^2 + (1-p)^2 = 0.58 (standard error 0.0016).
  EXPECT_EQ(overlap(mask, pr::bernoulli(key, p, {n})), 1.0);
  Array keys = pr::split(key);
  EXPECT_NEAR(overlap(pr::bernoulli(pr::key_at(keys, 0), p, {n}),
                      pr::bernoulli(pr::key_at(keys, 1), p, {n})),
              p * p + (1 - p) * (1 - p), 0.01);
}

TEST(RandomOpsDropout, KeepsScaledValuesWhereTheMaskIsTrue) {
  Array key = pr::prng_key_data(5);
  Array x = Array::from_floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const double rate = 0.25;
  std::vector<float> y = pr::dropout(key, rate, x).to_floats();
  std::vector<int64_t> keep = pr::bernoulli(key, 1 - rate, {2, 4}).to_ints();
  std::vector<float> xs = x.to_floats();
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], keep[i] ? xs[i] / 0.75f : 0.0f) << "index " << i;
  }
  EXPECT_EQ(pr::dropout(key, 0.0, x).to_floats(), xs);
  EXPECT_EQ(pr::dropout(key, 1.0, x).to_floats(), std::vector<float>(8, 0.0f));
  expect_error_mentions([&] { pr::dropout(key, 1.5, x); }, {"dropout", "rate"});
}

TEST(RandomOpsDropout, GradientIsTheScaledMask) {
  Array key = pr::prng_key_data(9);
  const double rate = 0.5;
  Array x =
      Array::from_doubles({3, 4}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2});
  auto fn = [&](const std::vector<Array>& in) { return sum(pr::dropout(key, rate, in[0])); };
  testing::expect_gradients_match_finite_differences(fn, {x});
  TreeFunction loss = [&](const std::vector<Tree>& args) { return Tree(fn({args[0].leaf()})); };
  std::vector<double> g = grad(loss)({x}).leaf().to_doubles();
  std::vector<int64_t> keep = pr::bernoulli(key, 1 - rate, {3, 4}).to_ints();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], keep[i] ? 2.0 : 0.0) << "index " << i;
}

// ---- errors ------------------------------------------------------------------------------------

TEST(RandomOpsErrors, KeyArraysAndWrongDtypesAreRefused) {
  Array keys = pr::split(pr::prng_key_data(0), 2);
  expect_error_mentions([&] { pr::random_bits(keys, {3}); },
                        {"random_bits accepts a single key", "u32[2,2]", "key_at"});
  expect_error_mentions([&] { pr::split(keys); }, {"split accepts a single key"});
  expect_error_mentions(
      [&] {
        pr::uniform(Array::from_floats({2}, {0, 1}), {3});
      },
      {"uniform", "expected a key", "f32[2]"});
  expect_error_mentions([&] { pr::uniform(pr::prng_key_data(0), {3}, 0.0, 1.0, DType::f64); },
                        {"uniform", "only dtype f32", "f64"});
  expect_error_mentions(
      [&] {
        pr::normal(pr::prng_key_data(0), {2, -1});
      },
      {"normal", "negative dimension"});
  expect_error_mentions(
      [&] {
        pr::fold_in(pr::prng_key_data(0), Array::from_ints({2}, {1, 2}));
      },
      {"fold_in accepts a scalar", "i32[2]"});
}

}  // namespace
}  // namespace pmap_engine
