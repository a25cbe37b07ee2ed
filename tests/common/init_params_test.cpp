// init_mlp_params: JAX's initial-parameter scheme (normal(split(PRNGKey(seed))[i]) * scale,
// zero biases) on the host; init_model_params leaves the torch scheme to ddp_ref.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "pmap_engine/random.h"

namespace pr = pmap_engine::random;

namespace {

using parity::DType;
using parity::HostTensor;
using parity::NamedTensors;

std::vector<float> values_of(const HostTensor& tensor) {
  const float* data = tensor.data_as<float>();
  return std::vector<float>(data, data + tensor.num_elements());
}

TEST(InitParams, NamesShapesAndDtypesFollowFlaxDense) {
  const NamedTensors params = parity::init_mlp_params({784, 256, 10}, 0, 0.01);
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params.at("dense0.kernel").shape, (parity::Shape{784, 256}));
  EXPECT_EQ(params.at("dense0.bias").shape, (parity::Shape{256}));
  EXPECT_EQ(params.at("dense1.kernel").shape, (parity::Shape{256, 10}));
  EXPECT_EQ(params.at("dense1.bias").shape, (parity::Shape{10}));
  for (const auto& [name, tensor] : params) {
    EXPECT_EQ(tensor.dtype, DType::F32) << name;
    EXPECT_EQ(tensor.bytes.size(), tensor.num_bytes()) << name;
  }
}

TEST(InitParams, BiasesAreZero) {
  const NamedTensors params = parity::init_mlp_params({5, 7, 3}, 1, 0.5);
  for (const char* name : {"dense0.bias", "dense1.bias"}) {
    for (float value : values_of(params.at(name))) EXPECT_EQ(value, 0.0f) << name;
  }
}

TEST(InitParams, IsDeterministicAndSeedDependent) {
  const NamedTensors first = parity::init_mlp_params({16, 8, 4}, 42, 0.1);
  const NamedTensors second = parity::init_mlp_params({16, 8, 4}, 42, 0.1);
  for (const auto& [name, tensor] : first) {
    EXPECT_EQ(tensor.bytes, second.at(name).bytes) << name;
  }
  const NamedTensors other = parity::init_mlp_params({16, 8, 4}, 43, 0.1);
  EXPECT_NE(first.at("dense0.kernel").bytes, other.at("dense0.kernel").bytes);
}

TEST(InitParams, KernelsAreNormalOfSplitKeysTimesFloat32Scale) {
  const std::vector<int64_t> widths = {6, 5, 4, 3};
  const uint64_t seed = 1701;
  const double scale = 0.05;
  for (bool partitionable : {false, true}) {
    const NamedTensors params = parity::init_mlp_params(widths, seed, scale, partitionable);
    const auto keys = pr::split(pr::prng_key(static_cast<int64_t>(seed)), 3, partitionable);
    for (size_t layer = 0; layer < 3; ++layer) {
      std::vector<float> expected =
          pr::normal(keys[layer], {widths[layer], widths[layer + 1]}, partitionable);
      for (float& value : expected) value = value * static_cast<float>(scale);
      const std::string name = "dense" + std::to_string(layer) + ".kernel";
      EXPECT_EQ(values_of(params.at(name)), expected)
          << name << " partitionable " << partitionable;
    }
  }
}

TEST(InitParams, DefaultFlagIsJaxDefault) {
  const NamedTensors implicit = parity::init_mlp_params({8, 4}, 3, 0.01);
  const NamedTensors explicit_default =
      parity::init_mlp_params({8, 4}, 3, 0.01, pr::default_partitionable());
  EXPECT_EQ(implicit.at("dense0.kernel").bytes, explicit_default.at("dense0.kernel").bytes);
  const NamedTensors other_flag =
      parity::init_mlp_params({8, 4}, 3, 0.01, !pr::default_partitionable());
  EXPECT_NE(implicit.at("dense0.kernel").bytes, other_flag.at("dense0.kernel").bytes);
}

TEST(InitParams, SingleLayerKernelMatchesJaxRecord) {
  // With one layer and partitionable=true, keys[0] = split(PRNGKey(0), 1)[0] is the block of
  // counter [0, 0], the same key as split(PRNGKey(0))[0]; NVIDIA/TensorRT-Incubator
  // mlir-tensorrt/integrations/PJRT/test/JAX/test_random.py (commit f53b1db) records JAX's
  // normal(that key, (4, 4)). Scale 1 keeps the values unchanged.
  const NamedTensors params = parity::init_mlp_params({4, 4}, 0, 1.0, true);
  const std::vector<float> expected = {
      1.0040143f,  -0.9063372f, -0.7481722f, -1.1713669f, -0.8712328f, 0.58883816f,
      0.72392994f, -1.0255982f, 1.661628f,   -1.8910251f, -1.2889339f, 0.13360691f,
      -1.1530392f, 0.23929629f, 1.7448071f,  0.5050189f};
  EXPECT_EQ(values_of(params.at("dense0.kernel")), expected);
}

TEST(InitParams, KernelStdIsScale) {
  const double scale = 0.01;
  const NamedTensors params = parity::init_mlp_params({784, 256, 10}, 0, scale);
  const std::vector<float> kernel = values_of(params.at("dense0.kernel"));
  double sum = 0.0;
  double sum_squares = 0.0;
  for (float value : kernel) {
    sum += value;
    sum_squares += static_cast<double>(value) * value;
  }
  const double n = static_cast<double>(kernel.size());
  const double mean = sum / n;
  const double std_dev = std::sqrt(sum_squares / n - mean * mean);
  // 200,704 samples: the std's relative standard error is 1/sqrt(2n) = 0.16%.
  EXPECT_NEAR(mean, 0.0, 5 * scale / std::sqrt(n));
  EXPECT_NEAR(std_dev, scale, 0.01 * scale);
}

TEST(InitParams, RejectsBadInput) {
  EXPECT_THROW(parity::init_mlp_params({10}, 0, 0.01), parity::InputError);
  EXPECT_THROW(parity::init_mlp_params({}, 0, 0.01), parity::InputError);
  EXPECT_THROW(parity::init_mlp_params({10, 0, 3}, 0, 0.01), parity::InputError);
  EXPECT_THROW(parity::init_mlp_params({10, -4}, 0, 0.01), parity::InputError);
  EXPECT_THROW(parity::init_mlp_params({10, 4}, uint64_t{1} << 63, 0.01), parity::InputError);
  EXPECT_NO_THROW(parity::init_mlp_params({10, 4}, (uint64_t{1} << 63) - 1, 0.01));
}

// LibTorch's constructors draw the torch scheme (ddp_ref::torch_init_params): asked of common,
// which does not link LibTorch, it is an input error that says where the scheme is made.
TEST(InitParams, TheTorchSchemeIsMadeByDdpRef) {
  for (const char* name : {"mlp2-fmnist", "cnn-fmnist"}) {
    const parity::CaseSpec spec = parity::load_case(name, {"init.scheme=torch"});
    try {
      parity::init_model_params(spec);
      FAIL() << name << ": made";
    } catch (const parity::InputError& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr("which ddp_ref makes")) << name;
    }
  }
}

}  // namespace
