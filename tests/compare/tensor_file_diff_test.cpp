// Two tensor files on canonical names paired and judged (compare/tensor_diff.h
// diff_tensor_files), as `parity tensors diff` prints them: groups pair by name, names within a
// group, and each pair carries the mappings that named it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parity/compare/tensor_diff.h"

namespace parity::compare {
namespace {

using ::testing::ElementsAre;

interop::CanonicalParams params(NamedTensors tensors, std::vector<interop::NameMapping> mappings) {
  interop::CanonicalParams mapped;
  mapped.tensors = std::move(tensors);
  mapped.mappings = std::move(mappings);
  return mapped;
}

TEST(TensorFileDiff, PairsGroupsAndNamesAndJudgesEachPair) {
  MappedTensorFile a{"a.npz",
                     {{"params", params({{"dense0.kernel", HostTensor::from_f32({2}, {1, 2})},
                                         {"dense0.bias", HostTensor::from_f32({1}, {0})},
                                         {"dense1.bias", HostTensor::from_f32({1}, {0})}},
                                        {{"0.weight", "dense0.kernel", "transposed"}})},
                      {"grads", params({{"dense0.bias", HostTensor::from_f32({1}, {0})}}, {})}}};
  MappedTensorFile b{"b.npz",
                     {{"params", params({{"dense0.kernel", HostTensor::from_f32({2}, {1, 3})},
                                         {"dense0.bias", HostTensor::from_f32({2}, {0, 0})}},
                                        {})},
                      {"batch_stats", params({{"batchnorm0.mean", HostTensor::from_f32({1}, {0})}},
                                             {})}}};
  const TensorFileDiff diff = diff_tensor_files(a, b, 0, 0.5);
  ASSERT_EQ(diff.groups.size(), 1u);
  const TensorGroupDiff& group = diff.groups[0];
  EXPECT_EQ(group.group, "params");
  EXPECT_THAT(group.names.matched, ElementsAre("dense0.kernel"));
  ASSERT_EQ(group.pairs.size(), 1u);
  const TensorPair& pair = group.pairs[0];
  EXPECT_EQ(pair.delta.name, "dense0.kernel");
  EXPECT_EQ(pair.mapping_a.source, "0.weight");
  EXPECT_EQ(pair.mapping_a.note, "transposed");
  EXPECT_EQ(pair.mapping_b.source, "dense0.kernel");
  EXPECT_EQ(pair.shape, Shape({2}));
  EXPECT_EQ(pair.delta.max_abs, 1);
  EXPECT_FALSE(pair.delta.within_tolerance);
  EXPECT_THAT(diff.groups_only_in_a, ElementsAre("grads"));
  EXPECT_THAT(diff.groups_only_in_b, ElementsAre("batch_stats"));
  EXPECT_EQ(diff.num_matched(), 1u);
  EXPECT_EQ(diff.num_unmatched(), 2u);  // dense1.bias in A only; dense0.bias of another shape
  EXPECT_EQ(diff.num_compared(), 1u);
  EXPECT_EQ(diff.num_outside(), 1u);
  EXPECT_FALSE(diff.same());
}

TEST(TensorFileDiff, FilesOfDifferentGroupsPairNothing) {
  const MappedTensorFile a{"a.npz", {{"grads", params({}, {})}}};
  const MappedTensorFile b{"b.npz", {{"params", params({}, {})}}};
  const TensorFileDiff diff = diff_tensor_files(a, b, 0, 0);
  EXPECT_TRUE(diff.groups.empty());
  EXPECT_THAT(diff.groups_only_in_a, ElementsAre("grads"));
  EXPECT_THAT(diff.groups_only_in_b, ElementsAre("params"));
}

}  // namespace
}  // namespace parity::compare
