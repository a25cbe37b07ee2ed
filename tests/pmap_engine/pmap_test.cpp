// pmap without collectives: argument mapping (in_axes), output stacking (out_axes), the
// signature cache, donation, and the errors JAX users know.
#include "pmap_engine/pmap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

PmapOptions on_devices(int count) {
  PmapOptions options;
  options.axis_name = "data";
  options.devices = DeviceSet(count);
  return options;
}

std::vector<float> iota_values(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i);
  return values;
}

TEST(Devices, SortedByIdAndSizedFromXlaFlags) {
  DeviceSet four(4);
  ASSERT_EQ(four.size(), 4);
  EXPECT_EQ(four.devices()[3].to_string(), "CpuDevice(id=3)");
  setenv("XLA_FLAGS", "--foo --xla_force_host_platform_device_count=3", 1);
  EXPECT_EQ(DeviceSet::from_environment().size(), 3);
  setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=x", 1);
  EXPECT_THROW(DeviceSet::from_environment(), EngineError);
  unsetenv("XLA_FLAGS");
  EXPECT_EQ(DeviceSet::from_environment(8).size(), 8);
}

TEST(Pmap, MapsTheLeadingAxisAndStacksOutputs) {
  Pmapped double_it =
      pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf() * 2.0); }, on_devices(4));
  Tree out = double_it({Array::from_floats({4, 3}, iota_values(12))});
  EXPECT_EQ(out.leaf().shape(), (Shape{4, 3}));
  EXPECT_EQ(out.leaf().to_floats()[11], 22.0f);
  double_it({Array::from_floats({4, 3}, iota_values(12))});
  EXPECT_EQ(double_it.cache_stats().misses, 1);
  EXPECT_EQ(double_it.cache_stats().hits, 1);
}

TEST(Pmap, InAxesNoneBroadcastsAndOtherAxesSlice) {
  PmapOptions options = on_devices(2);
  options.in_axes = {std::nullopt, 1};
  Pmapped f =
      pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf() + a[1].leaf()); }, options);
  // w: [3] on every device; x: [3, 2] mapped on axis 1 -> device d gets column d.
  Tree out =
      f({Array::from_floats({3}, {100, 200, 300}), Array::from_floats({3, 2}, {0, 1, 2, 3, 4, 5})});
  EXPECT_EQ(out.leaf().shape(), (Shape{2, 3}));
  EXPECT_EQ(out.leaf().to_floats(), (std::vector<float>{100, 202, 304, 101, 203, 305}));
}

TEST(Pmap, MappedSizeAboveTheDeviceCountIsJaxsError) {
  // Pitfall P6: a global batch of 65 on 8 devices, in the release the engine models by default
  // (jax_release_test.cpp has both releases' texts).
  Pmapped f = pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf()); }, on_devices(8));
  EXPECT_THAT(
      [&] {
        f({Array::from_floats({65, 2}, iota_values(130))});
      },
      ::testing::ThrowsMessage<EngineError>(
          AllOf(HasSubstr("implies that array axis 0 is partitioned 8 times, but the dimension "
                          "size is 65 (full shape: (65, 2)"),
                HasSubstr("(devices, per_device_batch, ...)"))));
}

TEST(Pmap, InconsistentMappedSizesListEveryArgument) {
  Pmapped f = pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf()); }, on_devices(8));
  EXPECT_THAT(
      [&] {
        f({Array::from_floats({4}, iota_values(4)), Array::from_floats({2}, {0, 1})});
      },
      ::testing::ThrowsMessage<EngineError>(
          AllOf(HasSubstr("pmap got inconsistent sizes for array axes to be mapped"),
                HasSubstr("argument 0 has shape [4] and axis 0 is to be mapped"),
                HasSubstr("argument 1 has shape [2] and axis 0 is to be mapped"))));
}

TEST(Pmap, InAxesThatDoNotMatchTheArgumentsAreRefused) {
  PmapOptions options = on_devices(2);
  options.in_axes = {0};
  Pmapped f = pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf()); }, options);
  EXPECT_THAT(
      [&] {
        f({Array::from_floats({2}, {0, 1}), Array::from_floats({2}, {0, 1})});
      },
      ::testing::ThrowsMessage<EngineError>(
          HasSubstr("pmap in_axes specification must be a tree prefix of the corresponding "
                    "value, got specification (0,) for value tree (*, *)")));
  PmapOptions scalar = on_devices(2);
  Pmapped g = pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf()); }, scalar);
  EXPECT_THAT([&] { g({Array::scalar(1.0)}); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("its rank should be at least 1")));
}

TEST(Pmap, OutAxesNoneReturnsTheSharedValueAndRefusesDivergentOnes) {
  PmapOptions options = on_devices(3);
  options.in_axes = {std::nullopt, 0};
  options.out_axes = {std::nullopt, 0};
  Pmapped f = pmap(
      [](const std::vector<Tree>& a) {
        return Tree::tuple({Tree(a[0].leaf() * 2.0), Tree(a[1].leaf() * 2.0)});
      },
      options);
  Tree out = f({Array::from_floats({2}, {1, 2}), Array::from_floats({3}, {0, 1, 2})});
  EXPECT_EQ(out[0].leaf().shape(), (Shape{2}));
  EXPECT_EQ(out[1].leaf().shape(), (Shape{3}));
  PmapOptions wrong = on_devices(3);
  wrong.out_axes = {std::nullopt};
  Pmapped g = pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf()); }, wrong);
  EXPECT_THAT(
      [&] {
        g({Array::from_floats({3}, {0, 1, 2})});
      },
      ::testing::ThrowsMessage<EngineError>(HasSubstr("differs between device 0 and device 1")));
}

TEST(Pmap, DonatedMappedArgumentsAreUpdatedInPlaceOnEveryDevice) {
  PmapOptions options = on_devices(4);
  options.donate_argnums = {0};
  Pmapped step = pmap([](const std::vector<Tree>& a) { return Tree(a[0].leaf() - 1.0); }, options);
  Array params = Array::from_floats({4, 256}, std::vector<float>(1024, 3));
  Tree out = step({params});
  EXPECT_TRUE(params.is_deleted());
  EXPECT_EQ(out.leaf().to_floats()[1023], 2.0f);
  EXPECT_EQ(step.last_execution().donated_reuses, 4);
  // Per device: its 1 KiB slice, written in place, and the 4-byte literal.
  EXPECT_EQ(step.last_execution().peak_bytes_per_device, 256 * 4 + 4);
}

}  // namespace
}  // namespace pmap_engine

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

TEST(PmapReplicationCheck, NamesTheFirstDivergentLeafAndDevice) {
  // p - x with a different x per device: the "updated parameters" differ (pitfall P11).
  PmapOptions options = on_devices(4);
  options.in_axes = {std::nullopt, 0};
  options.check_replicated_outputs = {0};
  Pmapped unsynchronised = pmap(
      [](const std::vector<Tree>& a) {
        return Tree::tuple(
            {Tree::dict({{"w", a[0]["w"].leaf() - a[1].leaf()}}), Tree(a[1].leaf())});
      },
      options);
  Tree params = Tree::dict({{"w", Array::from_floats({2}, {1, 1})}});
  Array grads = Array::from_floats({4, 2}, {0, 0, 0, 0, 0, 1, 0, 0});
  EXPECT_THAT(
      [&] {
        unsynchronised({params, grads});
      },
      ::testing::ThrowsMessage<EngineError>(
          AllOf(HasSubstr("replication check: output [0].w differs between device 0 and "
                          "device 2 (first at element 1: 1 vs 0)"),
                HasSubstr("pitfalls P4, P11"))));

  // The same update with the gradient averaged first (pmean) keeps the replicas identical:
  // every device gets w - mean(x) = [1, 1] - [0, 1/4].
  Pmapped synchronised = pmap(
      [](const std::vector<Tree>& a) {
        return Tree::tuple({Tree::dict({{"w", a[0]["w"].leaf() - pmean(a[1].leaf(), "data")}}),
                            Tree(a[1].leaf())});
      },
      options);
  Tree out = synchronised({params, grads});
  EXPECT_EQ(out[0]["w"].leaf().to_floats(),
            (std::vector<float>{1, 0.75f, 1, 0.75f, 1, 0.75f, 1, 0.75f}));
}

}  // namespace
}  // namespace pmap_engine
