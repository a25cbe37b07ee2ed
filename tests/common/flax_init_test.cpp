// init.scheme = "flax": flax.linen's default initialisation of a layers model, and the two
// pieces it rests on, Flax's per-parameter key and jax.random.truncated_normal.
//
// Provenance: the SHA-1 words come from Python's hashlib (python3 -c "import hashlib;
// hashlib.sha1(b'Conv_0\x01').digest()[:4].hex()"), which is what flax/core/scope.py
// _fold_in_static calls; the other expectations are derived from the definitions (cited beside
// each). JAX itself is not installable here, so no value is compared with one JAX printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/model_layers.h"
#include "pmap_engine/random.h"

namespace parity {
namespace {

namespace pr = pmap_engine::random;

TEST(FlaxInit, ParamKeyFoldsInTheSha1OfTheModulePathAndCallCount) {
  const pr::Key root = pr::prng_key(0);
  // _fold_in_static(rng, ("Conv_0", 1)): sha1(b"Conv_0" + b"\x01")[:4], big-endian.
  EXPECT_EQ(flax_param_key(root, {"Conv_0"}, 1), pr::fold_in(root, 0x5cf1dc75u));
  // Nested scopes append their names: ("Residual_2", "Conv_1", 1), no separators.
  EXPECT_EQ(flax_param_key(root, {"Residual_2", "Conv_1"}, 1), pr::fold_in(root, 0xc500554du));
  EXPECT_EQ(flax_param_key(root, {"Dense_0"}, 1), pr::fold_in(root, 0xb2b71315u));
  EXPECT_NE(flax_param_key(root, {"Dense_0"}, 2), flax_param_key(root, {"Dense_0"}, 1));
}

TEST(FlaxInit, ErfIsWithinFourUlpsOfTheCorrectlyRoundedValue) {
  // XLA's float32 erf is Eigen's rational approximation, a few ulps off: at x = 1.6875 it gives
  // 0.98298955 against 0.98298972 (3 ulps), as the same fused Horner steps in numpy float32
  // give too.
  for (float x = -4.5f; x <= 4.5f; x += 0.0625f) {
    const auto exact = static_cast<float>(std::erf(static_cast<double>(x)));
    EXPECT_NEAR(pr::erf(x), exact, 4 * std::abs(std::nextafter(exact, 2.0f) - exact) + 1e-30)
        << "x = " << x;
  }
  EXPECT_EQ(pr::erf(4.0f), 1.0f);  // saturated from 3.8325069 on
  EXPECT_EQ(pr::erf(-5.0f), -1.0f);
}

TEST(FlaxInit, TruncatedNormalStaysInsideItsBoundsWithTheTruncatedMoments) {
  const std::vector<float> values = pr::truncated_normal(pr::prng_key(3), -2.0f, 2.0f, {20000},
                                                         pr::default_partitionable());
  double sum = 0, sum_squares = 0;
  for (float value : values) {
    ASSERT_GT(value, -2.0f);
    ASSERT_LT(value, 2.0f);
    sum += value;
    sum_squares += static_cast<double>(value) * value;
  }
  const double n = static_cast<double>(values.size());
  // A standard normal truncated to (-2, 2): mean 0, standard deviation 0.87962566103423978 (the
  // constant variance_scaling divides by). Sampling error at n = 20000: about 0.006 and 0.005.
  EXPECT_NEAR(sum / n, 0.0, 0.025);
  EXPECT_NEAR(std::sqrt(sum_squares / n - (sum / n) * (sum / n)), 0.87962566103423978, 0.02);
}

TEST(FlaxInit, CnnKernelsAreLecunNormalBiasesZeroScalesOne) {
  const CaseSpec spec = load_case("cnn-fmnist", {"init.scheme=flax"});
  const NamedTensors params = init_model_params(spec);
  const ModelShapes shapes = infer_model_shapes(spec.model.layers, spec.model.input);
  ASSERT_EQ(params.size(), shapes.params.size());
  for (const ModelTensor& expected : shapes.params) {
    const HostTensor& tensor = params.at(expected.name);
    ASSERT_EQ(tensor.shape, Shape(expected.shape.begin(), expected.shape.end())) << expected.name;
    const float* values = tensor.data_as<float>();
    const size_t count = tensor.num_elements();
    const std::string leaf = expected.name.substr(expected.name.rfind('/') + 1);
    if (leaf == "kernel") {
      // lecun_normal: a normal truncated to (-2, 2) times sqrt(1 / fan_in) / 0.8796..., so its
      // standard deviation is sqrt(1 / fan_in); fan_in = H * W * I (HWIO) or `in`.
      const double fan_in = static_cast<double>(count / static_cast<size_t>(expected.shape.back()));
      const double bound = 2.0 / 0.87962566103423978 / std::sqrt(fan_in);
      double sum_squares = 0;
      for (size_t i = 0; i < count; ++i) {
        ASSERT_LT(std::abs(values[i]), bound) << expected.name;
        sum_squares += static_cast<double>(values[i]) * values[i];
      }
      EXPECT_NEAR(std::sqrt(sum_squares / static_cast<double>(count)), 1.0 / std::sqrt(fan_in),
                  0.25 / std::sqrt(fan_in))
          << expected.name << " (" << count << " values)";
    } else {
      const float constant = leaf == "scale" ? 1.0f : 0.0f;
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(values[i], constant) << expected.name;
    }
  }
  // Every kernel has its own key: no two kernels of one shape are equal.
  EXPECT_NE(params.at("Residual_0/Conv_0/kernel").bytes, params.at("Residual_0/Conv_1/kernel").bytes);
}

// The standard deviation of a tensor's values.
double spread(const HostTensor& tensor) {
  const float* values = tensor.data_as<float>();
  double sum = 0, sum_squares = 0;
  const size_t count = tensor.num_elements();
  for (size_t i = 0; i < count; ++i) {
    sum += values[i];
    sum_squares += static_cast<double>(values[i]) * values[i];
  }
  const double n = static_cast<double>(count);
  return std::sqrt(sum_squares / n - (sum / n) * (sum / n));
}

TEST(FlaxInit, ViTPositionsAreNormalTimesTwoHundredthsAndAttentionKernelsLecunOverTheirInputs) {
  const NamedTensors params = init_model_params(load_case("vit-fmnist"));
  // AddPositionEmbs: normal(stddev=0.02); 49 x 64 values, sampling error about 0.0003.
  EXPECT_NEAR(spread(params.at("AddPositionEmbs_0/pos_embedding")), 0.02, 0.0015);
  // DenseGeneral query (64, 4, 16) initialises as (64, 64): fan_in 64, standard deviation 1/8;
  // out (4, 16, 64) as (64, 64) too. A fan-in of 4 * 64 (the 3-D shape read as a conv's) would
  // give 1/16.
  const std::string attention = "Residual_0/MultiHeadDotProductAttention_0/";
  EXPECT_NEAR(spread(params.at(attention + "query/kernel")), 0.125, 0.01);
  EXPECT_NEAR(spread(params.at(attention + "out/kernel")), 0.125, 0.01);
  // MlpBlock's second dense: (128, 64), fan_in 128.
  EXPECT_NEAR(spread(params.at("Residual_1/MlpBlock_0/Dense_1/kernel")), 1 / std::sqrt(128.0),
              0.01);
  // query, key and value are separate modules with keys of their own.
  EXPECT_NE(params.at(attention + "query/kernel").bytes, params.at(attention + "key/kernel").bytes);
}

TEST(FlaxInit, WidthsModelsRefuseTheFlaxScheme) {
  try {
    load_case("mlp2-fmnist", {"init.scheme=flax"});
    FAIL() << "loaded";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("use jax-normal or torch for a widths model"));
  }
}

}  // namespace
}  // namespace parity
