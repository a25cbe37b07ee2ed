// shard_map over 1-D and 2-D meshes (jax/_src/shard_map.py semantics), pmap as shard_map on a
// one-axis mesh (jax/_src/pmap.py), per-leaf in_axes trees and out_axes other than 0/None.
// Inputs are small integers in f32, so every expected value below is exact and derived by hand
// in the comment next to it.
#include "pmap_engine/shard_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

std::vector<float> iota(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i);
  return values;
}

// Mesh('x': 2, 'y': 4) over 8 devices: device 4*i + j sits at (x=i, y=j).
Mesh mesh_2x4() { return Mesh(DeviceSet(8), {{"x", 2}, {"y", 4}}); }

ShardMapOptions specs(std::vector<PartitionSpec> in, std::vector<PartitionSpec> out) {
  ShardMapOptions options;
  options.in_specs = std::move(in);
  options.out_specs = std::move(out);
  return options;
}

TEST(Mesh, LaysDevicesOutRowMajorAndPrintsLikeJax) {
  const Mesh mesh = mesh_2x4();
  EXPECT_EQ(mesh.to_string(), "Mesh('x': 2, 'y': 4)");
  EXPECT_EQ(mesh.size(), 8);
  // Device 6 = 4*1 + 2: x=1, y=2.
  EXPECT_EQ(mesh.coordinate(6, 0), 1);
  EXPECT_EQ(mesh.coordinate(6, 1), 2);
  EXPECT_EQ(PartitionSpec({{"x"}, {}}).to_string(), "PartitionSpec('x', None)");
  EXPECT_EQ(PartitionSpec({{"x", "y"}}).to_string(), "PartitionSpec(('x', 'y'),)");
  EXPECT_EQ(PartitionSpec().to_string(), "PartitionSpec()");
  EXPECT_THAT(
      [] {
        Mesh(DeviceSet(4), {{"x", 2}, {"y", 4}});
      },
      ::testing::ThrowsMessage<EngineError>(HasSubstr("needs 8 devices but only 4 are available")));
  EXPECT_THAT(
      [] {
        Mesh(DeviceSet(4), {{"x", 2}, {"x", 2}});
      },
      ::testing::ThrowsMessage<EngineError>(HasSubstr("'x' appears twice")));
}

TEST(ShardMap, BlocksFollowTheSpecAndReassembleUnchanged) {
  // Identity under P('x', 'y'), P(('x', 'y')) and P(None, ('y', 'x')) on an [8, 8] iota: the
  // blocks go out and come back to the same places, so the output equals the input bit for bit.
  const Array a = Array::from_floats({8, 8}, iota(64));
  for (const PartitionSpec& spec : {PartitionSpec({{"x"}, {"y"}}), PartitionSpec({{"x", "y"}}),
                                    PartitionSpec({{}, {"y", "x"}})}) {
    ShardMapped identity = shard_map([](const std::vector<Tree>& args) { return args[0]; },
                                     mesh_2x4(), specs({spec}, {spec}));
    EXPECT_EQ(identity({a}).leaf().to_floats(), iota(64)) << spec.to_string();
  }
}

TEST(ShardMap, EachDeviceSeesItsBlock) {
  // P('x', 'y') on a [4, 8] iota: device (i, j) holds rows 2i..2i+1, columns 2j..2j+1, whose
  // first element is 8*2i + 2j = 16i + 2j. Each device returns that element as a [1, 1] block,
  // so out[i, j] = 16i + 2j.
  ShardMapped first = shard_map(
      [](const std::vector<Tree>& args) {
        return Tree(slice(args[0].leaf(), {0, 0}, {1, 1}));
      },
      mesh_2x4(), specs({PartitionSpec({{"x"}, {"y"}})}, {PartitionSpec({{"x"}, {"y"}})}));
  const Array out = first({Array::from_floats({4, 8}, iota(32))}).leaf();
  EXPECT_EQ(out.shape(), (Shape{2, 4}));
  EXPECT_EQ(out.to_floats(), (std::vector<float>{0, 2, 4, 6, 16, 18, 20, 22}));

  // P(('x', 'y')) on a [8] iota: x is the major axis, so device (i, j) holds element 4i + j.
  ShardMapped flat = shard_map(
      [](const std::vector<Tree>& args) {
        return Tree(args[0].leaf() * 0.0 +
                    astype(axis_index("x") * 4 + axis_index("y"), DType::f32));
      },
      mesh_2x4(), specs({PartitionSpec({{"x", "y"}})}, {PartitionSpec({{"x", "y"}})}));
  EXPECT_EQ(flat({Array::from_floats({8}, iota(8))}).leaf().to_floats(), iota(8));
}

TEST(ShardMap, CollectivesRunWithinTheGroupsOfTheirAxis) {
  // a = iota [4, 8] under P('x', 'y'): device (i, j) holds a[2i:2i+2, 2j:2j+2].
  const Array a = Array::from_floats({4, 8}, iota(32));
  // psum over 'y' adds the 4 column blocks of a row block: out[r, c] = sum_k a[r, 2k + c]
  // = 4*8r + (0+2+4+6) + 4c = 32r + 12 + 4c; replicated over 'y', so out_specs P('x').
  ShardMapped row_sums =
      shard_map([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "y")); },
                mesh_2x4(), specs({PartitionSpec({{"x"}, {"y"}})}, {PartitionSpec({{"x"}})}));
  std::vector<float> expected;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 2; ++c) expected.push_back(static_cast<float>(32 * r + 12 + 4 * c));
  }
  EXPECT_EQ(row_sums({a}).leaf().to_floats(), expected);

  // psum over 'x' adds the 2 row blocks of a column block: out[r, c] = a[r, c] + a[r + 2, c]
  // = (8r + c) + (8r + 16 + c) = 16r + 2c + 16, for r in 0..1, c in 0..7.
  ShardMapped column_sums =
      shard_map([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "x")); },
                mesh_2x4(), specs({PartitionSpec({{"x"}, {"y"}})}, {PartitionSpec({{}, {"y"}})}));
  expected.clear();
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 8; ++c) expected.push_back(static_cast<float>(16 * r + 2 * c + 16));
  }
  EXPECT_EQ(column_sums({a}).leaf().to_floats(), expected);

  // ppermute over 'y' shifts each row's blocks one to the right within the row (j -> j+1 mod
  // 4): device (i, j) ends up with the block of (i, j-1), so out = a with column blocks rolled.
  ShardMapped roll = shard_map(
      [](const std::vector<Tree>& args) {
        return Tree(ppermute(args[0].leaf(), "y", {{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
      },
      mesh_2x4(), specs({PartitionSpec({{"x"}, {"y"}})}, {PartitionSpec({{"x"}, {"y"}})}));
  const std::vector<float> rolled = roll({a}).leaf().to_floats();
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 8; ++c) {
      const int source_column = (c + 6) % 8;  // block j-1, same offset inside the block
      EXPECT_EQ(rolled[static_cast<size_t>(8 * r + c)], static_cast<float>(8 * r + source_column));
    }
  }
}

TEST(ShardMap, CheckVmaProvesReplicationStatically) {
  // A value split over 'x' returned as replicated (P()) is refused before anything runs.
  ShardMapped unreduced = shard_map([](const std::vector<Tree>& args) { return args[0]; },
                                    mesh_2x4(), specs({PartitionSpec({{"x"}})}, {PartitionSpec()}));
  EXPECT_THAT(
      [&] {
        unreduced({Array::from_floats({2}, {1, 2})});
      },
      ::testing::ThrowsMessage<EngineError>(
          AllOf(HasSubstr("out_specs which require replication which can't be statically "
                          "inferred given the mesh Mesh('x': 2, 'y': 4)"),
                HasSubstr("replicated across mesh axis 'x'"))));
  // After psum over 'x' it is invariant: P() is accepted; the sum is 1 + 2 = 3.
  ShardMapped reduced =
      shard_map([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "x")); },
                mesh_2x4(), specs({PartitionSpec({{"x"}})}, {PartitionSpec()}));
  EXPECT_EQ(reduced({Array::from_floats({2}, {1, 2})}).leaf().to_floats(), (std::vector<float>{3}));
  // all_gather is Varying -> Varying in JAX: still refused as replicated.
  ShardMapped gathered =
      shard_map([](const std::vector<Tree>& args) { return Tree(all_gather(args[0].leaf(), "x")); },
                mesh_2x4(), specs({PartitionSpec({{"x"}})}, {PartitionSpec()}));
  EXPECT_THROW(gathered({Array::from_floats({2}, {1, 2})}), EngineError);
  // Without check_vma the claim is checked at run time, bit for bit.
  ShardMapOptions unchecked = specs({PartitionSpec({{"x"}})}, {PartitionSpec()});
  unchecked.check_vma = false;
  ShardMapped runtime =
      shard_map([](const std::vector<Tree>& args) { return args[0]; }, mesh_2x4(), unchecked);
  EXPECT_THAT(
      [&] {
        runtime({Array::from_floats({2}, {1, 2})});
      },
      ::testing::ThrowsMessage<EngineError>(HasSubstr("differs between device 0 and device 4")));
}

TEST(ShardMap, IndivisibleDimensionIsJaxsError) {
  ShardMapped f = shard_map([](const std::vector<Tree>& args) { return args[0]; }, mesh_2x4(),
                            specs({PartitionSpec({{"y"}})}, {PartitionSpec({{"y"}})}));
  EXPECT_THAT([&] { f({Array::from_floats({6}, iota(6))}); },
              ::testing::ThrowsMessage<EngineError>(AllOf(
                  HasSubstr("not evenly divisible by the corresponding mesh axis sizes"),
                  HasSubstr("maps array axis 0 (of size 6) to mesh axis 'y' (of size 4), but 4 "
                            "does not evenly divide 6"))));
  ShardMapped unknown = shard_map([](const std::vector<Tree>& args) { return args[0]; }, mesh_2x4(),
                                  specs({PartitionSpec({{"z"}})}, {PartitionSpec()}));
  EXPECT_THAT(
      [&] {
        unknown({Array::from_floats({2}, {0, 1})});
      },
      ::testing::ThrowsMessage<EngineError>(
          HasSubstr("mesh axis 'z' is not an axis of Mesh('x': 2, 'y': 4)")));
}

TEST(ShardMap, GradOfPsumdLossFollowsCheckVma) {
  // loss = psum(sum(w * x), 'x') on a 1-D mesh of 4; w replicated (P()), x split. Device d
  // holds x[2d:2d+2] = (2d, 2d+1). (shard_map_vma_grad_test.cpp checks these rules in depth.)
  const Mesh mesh(DeviceSet(4), {{"x", 4}});
  TreeFunction loss = [](const std::vector<Tree>& args) {
    return Tree(psum(sum(args[0].leaf() * args[1].leaf()), "x"));
  };
  auto grad_step = [&](bool check_vma) {
    ShardMapOptions options =
        specs({PartitionSpec(), PartitionSpec({{"x"}})}, {PartitionSpec({{"x"}})});
    options.check_vma = check_vma;
    return shard_map(
        [loss](const std::vector<Tree>& args) {
          return Tree(reshape(grad(loss)({args[0], args[1]}).leaf(), {1, 2}));
        },
        mesh, options);
  };
  const Array w = Array::from_floats({2}, {1, 1});
  const Array x = Array::from_floats({8}, iota(8));
  // check_vma=True (JAX's default): psum's transpose is pvary, w's implicit pvary transposes to
  // a psum, so every device gets the sum of the devices' x_d: (0+2+4+6, 1+3+5+7).
  EXPECT_EQ(grad_step(true)({w, x}).leaf().to_floats(),
            (std::vector<float>{12, 16, 12, 16, 12, 16, 12, 16}));
  // check_vma=False follows pmap: psum's transpose is psum, so the loss's cotangent 1 becomes
  // psum(1) = 4 on every device and device d's gradient with respect to w is 4 * x_d =
  // (8d, 8d + 4).
  const std::vector<float> grads = grad_step(false)({w, x}).leaf().to_floats();
  EXPECT_EQ(grads, (std::vector<float>{0, 4, 8, 12, 16, 20, 24, 28}));
}

TEST(ShardMap, SeveralMeshesLiveInOneProcess) {
  const Array a = Array::from_floats({8}, iota(8));
  ShardMapped over_two =
      shard_map([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "d")); },
                Mesh(DeviceSet(2), {{"d", 2}}), specs({PartitionSpec({{"d"}})}, {PartitionSpec()}));
  ShardMapped over_eight =
      shard_map([](const std::vector<Tree>& args) { return Tree(psum(args[0].leaf(), "d")); },
                Mesh(DeviceSet(8), {{"d", 8}}), specs({PartitionSpec({{"d"}})}, {PartitionSpec()}));
  // Blocks of 4: (0+4, 1+5, 2+6, 3+7); blocks of 1: 0+1+...+7 = 28.
  EXPECT_EQ(over_two({a}).leaf().to_floats(), (std::vector<float>{4, 6, 8, 10}));
  EXPECT_EQ(over_eight({a}).leaf().to_floats(), (std::vector<float>{28}));
}

PmapOptions on_devices(int count) {
  PmapOptions options;
  options.axis_name = "i";
  options.devices = DeviceSet(count);
  return options;
}

TEST(PmapOnShardMap, OutAxesPlaceTheDeviceAxisAnywhere) {
  // Device d gets row d of a [3, 2] iota: (2d, 2d+1). out_axes 1 and -1 put the device axis
  // last: out[k, d] = 2d + k.
  for (const AxisSpec& out_axis : {AxisSpec(1), AxisSpec(-1)}) {
    PmapOptions options = on_devices(3);
    options.out_axes = {out_axis};
    Pmapped f = pmap([](const std::vector<Tree>& args) { return args[0]; }, options);
    const Array out = f({Array::from_floats({3, 2}, iota(6))}).leaf();
    EXPECT_EQ(out.shape(), (Shape{2, 3})) << out_axis.to_string();
    EXPECT_EQ(out.to_floats(), (std::vector<float>{0, 2, 4, 1, 3, 5})) << out_axis.to_string();
  }
  PmapOptions too_far = on_devices(3);
  too_far.out_axes = {2};
  Pmapped g = pmap([](const std::vector<Tree>& args) { return args[0]; }, too_far);
  EXPECT_THAT([&] { g({Array::from_floats({3}, iota(3))}); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr("out_axes 2 is out of range")));
}

TEST(PmapOnShardMap, InAxesTreesApplyPerLeaf) {
  // params {'w': mapped on axis 0, 'b': broadcast}: device d computes w_d + b.
  PmapOptions options = on_devices(2);
  options.in_axes = {AxisSpec::dict({{"b", std::nullopt}, {"w", 0}})};
  Pmapped f = pmap(
      [](const std::vector<Tree>& args) { return Tree(args[0]["w"].leaf() + args[0]["b"].leaf()); },
      options);
  const Tree params = Tree::dict(
      {{"w", Array::from_floats({2, 2}, {0, 1, 2, 3})}, {"b", Array::from_floats({2}, {10, 20})}});
  EXPECT_EQ(f({params}).leaf().to_floats(), (std::vector<float>{10, 21, 12, 23}));

  PmapOptions mismatched = on_devices(2);
  mismatched.in_axes = {AxisSpec::dict({{"w", 0}})};
  Pmapped g =
      pmap([](const std::vector<Tree>& args) { return Tree(args[0]["w"].leaf()); }, mismatched);
  EXPECT_THAT([&] { g({params}); },
              ::testing::ThrowsMessage<EngineError>(
                  HasSubstr("pmap in_axes specification must be a tree prefix of the "
                            "corresponding value, got specification {'w': 0} for value tree "
                            "{'b': *, 'w': *}")));
}

TEST(PmapOnShardMap, PmapEqualsShardMapWithTheSqueezedAxis) {
  // JAX >= 0.8: pmap(f) is shard_map over Mesh(devices[:n], ('i',)) with in_specs P('i'), the
  // mapped dimension squeezed inside. A psum'd step gives the same bits either way.
  const Array x = Array::from_floats({4, 3}, iota(12));
  Pmapped mapped =
      pmap([](const std::vector<Tree>& args) { return Tree(psum(tanh(args[0].leaf()), "i")); },
           on_devices(4));
  ShardMapOptions options = specs({PartitionSpec({{"i"}})}, {PartitionSpec({{"i"}})});
  options.check_vma = false;
  ShardMapped sharded =
      shard_map([](const std::vector<Tree>& args) { return Tree(psum(tanh(args[0].leaf()), "i")); },
                Mesh(DeviceSet(4), {{"i", 4}}), options);
  EXPECT_EQ(mapped({x}).leaf().to_floats(), sharded({x}).leaf().to_floats());
  // The per-device program is pmap's: no squeeze equations.
  EXPECT_THAT(mapped.program_text({x}), ::testing::Not(HasSubstr("reshape")));
}

}  // namespace
}  // namespace pmap_engine
