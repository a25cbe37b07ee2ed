// linen::dropout (flax.linen.Dropout): the keep mask is threefry's bernoulli (uniform < 1 - rate,
// from the host module, itself checked against JAX), kept values are x / (1 - rate) in x's
// dtype, deterministic and rate 0 return x untouched, and gradients flow through the mask.
//
// The JAX value used: uniform(key(0), (3,)) = [0.947667, 0.9785799, 0.33229148] under
// jax_threefry_partitionable=True, JAX's default (jax-ml/jax commit a60ead6's doctests; the
// [flip] vectors of random_ops_test.cpp). With rate 0.5 the keep mask is uniform < 0.5.
#include <gtest/gtest.h>

#include <vector>

#include "engine_test_util.h"
#include "gradient_check.h"
#include "pmap_engine/linen.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random_ops.h"

namespace pmap_engine {
namespace {

namespace pr = pmap_engine::random;

TEST(LinenDropout, MaskIsThreefryBernoulliAndKeptValuesAreScaled) {
  const Array key = pr::prng_key_data(7);
  const double rate = 0.3;
  const Array x = astype(testing::irregular({3, 5}), DType::f32);
  const std::vector<float> y = linen::dropout(x, rate, key).to_floats();
  // The mask from the host module: uniform(key, shape) < float32(1 - rate).
  const std::vector<float> u =
      pr::uniform(pr::key_from_data(key), {3, 5}, 0.0f, 1.0f, pr::default_partitionable());
  const std::vector<float> xs = x.to_floats();
  const float keep_prob = static_cast<float>(1.0 - rate);
  size_t num_kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const bool keep = u[i] < keep_prob;
    num_kept += keep;
    EXPECT_EQ(y[i], keep ? xs[i] / keep_prob : 0.0f) << "index " << i;
  }
  EXPECT_GT(num_kept, 0u);
  EXPECT_LT(num_kept, y.size());
}

TEST(LinenDropout, MatchesTheMaskJaxsUniformGives) {
  // uniform(key(0), (3,)) < 0.5 = [false, false, true]: only the third value is kept, doubled.
  const Array x = Array::from_floats({3}, {1, 2, 3});
  EXPECT_EQ(linen::dropout(x, 0.5, pr::prng_key_data(0)).to_floats(),
            (std::vector<float>{0, 0, 6}));
}

TEST(LinenDropout, DeterministicOrRateZeroReturnsTheInputUnchanged) {
  const Array x = Array::from_floats({2, 2}, {1, -2, 3, -4});
  const Array key = pr::prng_key_data(1);
  EXPECT_EQ(linen::dropout(x, 0.5, key, /*deterministic=*/true).to_floats(), x.to_floats());
  EXPECT_EQ(linen::dropout(x, 0.0, key).to_floats(), x.to_floats());
  // Nothing random is traced on those paths.
  for (double rate : {0.0, 0.5}) {
    const std::string program = testing::program_of(
        [&](const std::vector<Array>& in) { return linen::dropout(in[0], rate, key, rate > 0); },
        {x});
    EXPECT_EQ(program.find("random_"), std::string::npos) << program;
  }
  EXPECT_EQ(linen::dropout(x, 1.0, key).to_floats(), std::vector<float>(4, 0.0f));
}

TEST(LinenDropout, GradientMatchesFiniteDifferences) {
  const Array key = pr::prng_key_data(3);
  testing::expect_gradients_match_finite_differences(
      [&](const std::vector<Array>& in) {
        return sum(linen::dropout(in[0], 0.4, key) * testing::irregular({4, 3}, 2.0));
      },
      {testing::irregular({4, 3})});
}

}  // namespace
}  // namespace pmap_engine
