// linen::batch_norm_train under pmap with axis_name (flax.linen.BatchNorm(axis_name="data")):
// every device gets the statistics one device computes over the concatenated global batch, and
// the per-device gradients (through the pmean, whose transpose is a pmean) are the rows of the
// global batch's gradient.
//
// Inputs are small integers and every count a power of two, so E[x], E[x^2] and their pmean are
// exact in any order and the comparison is bit for bit; with 3 devices the division by 3 rounds
// differently from the single-device division by 12, so that grid point compares within f32
// rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/linen.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using testing::expect_near_all;

constexpr int64_t kLocalBatch = 4;
constexpr int64_t kFeatures = 3;

// x: [devices, kLocalBatch, kFeatures] of integers in [-4, 4].
Array global_batch(int64_t num_devices) {
  std::vector<float> values;
  for (int64_t i = 0; i < num_devices * kLocalBatch * kFeatures; ++i) {
    values.push_back(static_cast<float>((i * 7 + i / 5) % 9 - 4));
  }
  return Array::from_floats({num_devices, kLocalBatch, kFeatures}, values);
}

// BatchNorm's parameters and running statistics, dyadic so that y is exact too.
linen::BatchNormOutput normalize(const Array& x, const linen::BatchNormOptions& options) {
  const Array scale = Array::from_floats({kFeatures}, {1.5f, -0.5f, 2.0f});
  const Array bias = Array::from_floats({kFeatures}, {0.25f, 0.0f, -1.0f});
  const linen::BatchStats running{Array::from_floats({kFeatures}, {0.5f, -1.0f, 2.0f}),
                                  Array::from_floats({kFeatures}, {1.0f, 2.0f, 0.5f})};
  return linen::batch_norm_train(x, scale, bias, running, options);
}

// A cotangent for y: distinct per element, the same array whether sliced per device or not.
Array cotangent(int64_t num_devices) {
  std::vector<float> values;
  for (int64_t i = 0; i < num_devices * kLocalBatch * kFeatures; ++i) {
    values.push_back(0.25f * static_cast<float>(i % 11) - 1.0f);
  }
  return Array::from_floats({num_devices, kLocalBatch, kFeatures}, values);
}

// y, the batch and running statistics, and d sum(y * g) / dx, from (x, g) on one device.
Tree train_and_differentiate(const Array& x, const Array& g,
                             const std::optional<std::string>& axis_name) {
  linen::BatchNormOptions options;
  options.axis_name = axis_name;
  const linen::BatchNormOutput out = normalize(x, options);
  TreeFunction loss = [&](const std::vector<Tree>& a) {
    return Tree(sum(normalize(a[0].leaf(), options).y * g));
  };
  return Tree::tuple({out.y, out.batch.mean, out.batch.var, out.running.mean, out.running.var,
                      grad(loss)({x}).leaf()});
}

// The same quantities from pmap over `num_devices` devices, each with its slice of the batch.
Tree per_device(int64_t num_devices, const std::optional<std::string>& axis_name) {
  PmapOptions options;
  options.axis_name = "data";
  options.devices = DeviceSet(static_cast<int>(num_devices));
  Pmapped step = pmap(
      [&](const std::vector<Tree>& a) {
        return train_and_differentiate(a[0].leaf(), a[1].leaf(), axis_name);
      },
      options);
  return step({global_batch(num_devices), cotangent(num_devices)});
}

// Device d's copy of a statistic [devices, C] must equal `expected` [C].
void expect_every_device_has(const Array& stacked, const Array& expected, double tolerance,
                             const std::string& what) {
  const std::vector<double> values = stacked.to_doubles();
  const std::vector<double> one = expected.to_doubles();
  for (size_t d = 0; d < values.size() / one.size(); ++d) {
    const std::vector<double> device(values.begin() + static_cast<int64_t>(d * one.size()),
                                     values.begin() + static_cast<int64_t>((d + 1) * one.size()));
    if (tolerance == 0.0) {
      EXPECT_EQ(device, one) << what << " on device " << d;
    } else {
      expect_near_all(device, one, tolerance, what + " on device " + std::to_string(d));
    }
  }
}

void expect_synchronised_like_one_device(int64_t num_devices, double tolerance) {
  SCOPED_TRACE(std::to_string(num_devices) + " devices");
  const Tree mapped = per_device(num_devices, "data");
  const Shape global = {num_devices * kLocalBatch, kFeatures};
  const Tree single =
      train_and_differentiate(reshape(global_batch(num_devices), global),
                              reshape(cotangent(num_devices), global), std::nullopt);
  const char* names[] = {"batch mean", "batch var", "running mean", "running var"};
  for (size_t i = 1; i <= 4; ++i) {
    expect_every_device_has(mapped[i].leaf(), single[i].leaf(), tolerance, names[i - 1]);
  }
  // y and the gradient: device d's rows are rows [d * b, (d + 1) * b) of the global ones.
  for (size_t i : {size_t{0}, size_t{5}}) {
    const std::vector<double> rows = reshape(mapped[i].leaf(), global).to_doubles();
    if (tolerance == 0.0 && i == 0) {
      EXPECT_EQ(rows, single[i].leaf().to_doubles()) << "y";
    } else {
      // The gradient sums over devices in another order than over the global batch.
      expect_near_all(rows, single[i].leaf().to_doubles(), std::max(tolerance, 1e-6),
                      i == 0 ? "y" : "grad x");
    }
  }
}

TEST(LinenBatchNormPmap, AxisNameGivesEveryDeviceTheGlobalBatchStatistics) {
  expect_synchronised_like_one_device(2, 0.0);
  expect_synchronised_like_one_device(4, 0.0);
  expect_synchronised_like_one_device(3, 1e-6);
}

TEST(LinenBatchNormPmap, WithoutAxisNameEachDeviceUsesItsOwnBatch) {
  const Tree mapped = per_device(2, std::nullopt);
  const Array x = global_batch(2);
  for (int64_t d = 0; d < 2; ++d) {
    const Array local =
        reshape(slice(x, {d, 0, 0}, {d + 1, kLocalBatch, kFeatures}), {kLocalBatch, kFeatures});
    const std::vector<double> means = mapped[1].leaf().to_doubles();
    const std::vector<double> device_mean(means.begin() + d * kFeatures,
                                          means.begin() + (d + 1) * kFeatures);
    EXPECT_EQ(device_mean, mean(local, {0}).to_doubles()) << "device " << d;
  }
}

// pmap over 2 devices on the axis 'data'.
PmapOptions two_devices_on_data() {
  PmapOptions options;
  options.axis_name = "data";
  options.devices = DeviceSet(2);
  return options;
}

TEST(LinenBatchNormPmap, StatisticsAreStackedIntoOnePmean) {
  Pmapped step = pmap(
      [](const std::vector<Tree>& a) {
        linen::BatchNormOptions bn;
        bn.axis_name = "data";
        return Tree(normalize(a[0].leaf(), bn).y);
      },
      two_devices_on_data());
  EXPECT_EQ(step({global_batch(2)}).leaf().shape(), (Shape{2, kLocalBatch, kFeatures}));
  EXPECT_EQ(step.last_execution().num_collectives, 1);
}

// use_fast_variance=False with an axis_name (flax/linen/normalization.py _compute_stats):
// the mean is pmean'd first, then each device's squared deviations from that global mean, two
// collectives. Device 0 holds 10000 + [-1, 1], device 1 10002 + [-1, 1]: the global mean is
// 10001 and the deviations [-2, 0, 0, 2], so var = 2 on both devices, where each device's own
// batch has var 1. Every step is exact in f32 (integers below 2^24, halves); the one-pass form
// would have lost it (E[x^2] about 1e8, its f32 spacing 8).
TEST(LinenBatchNormPmap, TwoPassStatisticsPmeanTheMeanThenTheDeviationsFromIt) {
  Pmapped step = pmap(
      [](const std::vector<Tree>& a) {
        linen::BatchNormOptions bn;
        bn.axis_name = "data";
        bn.use_fast_variance = false;
        const linen::BatchStats running{zeros({1}), ones({1})};
        const linen::BatchNormOutput out =
            linen::batch_norm_train(a[0].leaf(), ones({1}), zeros({1}), running, bn);
        return Tree::tuple({out.batch.mean, out.batch.var});
      },
      two_devices_on_data());
  const Array x = Array::from_floats({2, 2, 1}, {9999, 10001, 10001, 10003});
  const Tree stats = step({x});
  EXPECT_EQ(stats[0].leaf().to_doubles(), (std::vector<double>{10001, 10001}));
  EXPECT_EQ(stats[1].leaf().to_doubles(), (std::vector<double>{2, 2}));
  EXPECT_EQ(step.last_execution().num_collectives, 2);
}

}  // namespace
}  // namespace pmap_engine
