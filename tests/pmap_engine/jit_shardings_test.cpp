// jit with in_shardings (NamedSharding over a Mesh): the checks jax/_src/pjit.py makes before
// tracing, with its error texts, and the values of the unsharded function when they pass.
// Expected texts are JAX's at jax-v0.11.0, the release the engine models by default:
// api_util.py flatten_axis_resources, named_sharding.py check_compatible_aval and
// NamedSharding.__repr__, sharding.py _common_shard_shape via pjit.py pjit_check_aval_sharding
// (jax_release_test.cpp has jax-v0.4.38's).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;

const Mesh& data_mesh() {
  static const Mesh mesh(DeviceSet(8), {{"data", 8}});
  return mesh;
}
NamedSharding sharded() { return NamedSharding(data_mesh(), PartitionSpec{{"data"}}); }
NamedSharding replicated() { return NamedSharding(data_mesh(), PartitionSpec{}); }

// f(params, x) = sum(x @ params.w + params.b): a stand-in for a loss.
Tree affine_sum(const std::vector<Tree>& args) {
  return Tree(sum(matmul(args[1].leaf(), args[0]["w"].leaf()) + args[0]["b"].leaf()));
}

Tree params(int64_t out) {
  return Tree::dict({{"w", full({4, out}, 0.25, DType::f32)}, {"b", full({out}, 1.0, DType::f32)}});
}

std::string error_of(const Jitted& f, const std::vector<Tree>& args) {
  try {
    f(args);
  } catch (const EngineError& error) {
    return error.what();
  }
  return "no error";
}

Jitted with_shardings(std::vector<NamedSharding> shardings, std::set<size_t> statics = {}) {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>(shardings.begin(), shardings.end());
  options.static_argnums = std::move(statics);
  return jit(affine_sum, options, "affine_sum");
}

TEST(JitShardings, ATupleShorterThanTheArgumentsIsRefusedAsJaxDoes) {
  // Seed 002 §2.2 passes in_shardings=(data_sharding, data_sharding) to a step of four
  // positional arguments; here two arguments and one sharding.
  const Jitted f = with_shardings({sharded()});
  EXPECT_EQ(error_of(f, {params(8), full({16, 4}, 1.0, DType::f32)}),
            "pjit in_shardings specification must be a tree prefix of the positional arguments "
            "tuple. In particular, pjit in_shardings must either be a Sharding, a "
            "PartitionSpec, or a tuple of length equal to the number of positional arguments. "
            "But pjit in_shardings is the wrong length: got a tuple or list of length 1 for an "
            "args tuple of length 2.");
}

TEST(JitShardings, ALeafThatDoesNotDivideOverTheMeshIsRefusedWithItsPath) {
  // params.b has 10 elements: P('data') over 8 devices cannot split it.
  const Jitted f = with_shardings({sharded(), sharded()});
  EXPECT_EQ(error_of(f, {params(10), full({16, 4}, 1.0, DType::f32)}),
            "One of pjit arguments with pytree key path args[0]['b'] was given the sharding "
            "NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), spec=P('data',), "
            "memory_kind=device) implies that array axis 0 is partitioned 8 times, but the "
            "dimension size is 10 (full shape: (10,), per-dimension tiling factors: (8,) should "
            "evenly divide the shape).");
}

// JAX names a leaf after the parameter its argument binds to (api_util.py
// _non_static_arg_names: f"{name}{keystr(path)}"), and falls back to args[i] when the signature
// does not bind the call's arguments.
TEST(JitShardings, ALeafIsNamedAfterItsParameterWhenTheSignatureBinds) {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>{sharded(), sharded()};
  options.arg_names = {"params", "x"};
  const std::vector<Tree> args = {params(10), full({16, 4}, 1.0, DType::f32)};
  EXPECT_THAT(error_of(jit(affine_sum, options, "affine_sum"), args),
              HasSubstr("with pytree key path params['b'] was given the sharding"));
  options.arg_names = {"params"};
  EXPECT_THAT(error_of(jit(affine_sum, options, "affine_sum"), args),
              HasSubstr("with pytree key path args[0]['b'] was given the sharding"));
}

TEST(JitShardings, AScalarWithASplitSpecIsRefusedWithTheHintForScalars) {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>{sharded()};
  const Jitted f = jit([](const std::vector<Tree>& args) { return args[0]; }, options, "id");
  EXPECT_THAT(error_of(f, {Tree::tuple({Array::scalar(3)})}),
              HasSubstr("One of pjit arguments with pytree key path args[0][0] is incompatible "
                        "with its sharding annotation NamedSharding(mesh=Mesh('data': 8, "
                        "axis_types=(Auto,)), spec=P('data',), memory_kind=device): Sharding "
                        "NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), "
                        "spec=P('data',), memory_kind=device) is only valid for values of rank "
                        "at least 1, but was applied to a value of rank 0. For scalars the "
                        "PartitionSpec should be P()"));
}

TEST(JitShardings, StaticArgumentsTakeNoSharding) {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>{replicated(), sharded()};
  options.static_argnums = {2};
  const Jitted f = jit(
      [](const std::vector<Tree>& args) {
        return Tree(affine_sum(args).leaf() * args[2].leaf().to_doubles().front());
      },
      options, "scaled");
  const Array result = f({params(8), full({16, 4}, 1.0, DType::f32), Array::scalar(2)}).leaf();
  EXPECT_EQ(result.to_doubles().front(), 2 * (16 * 8 * 1.0 + 16 * 8 * 1.0));
}

TEST(JitShardings, ValidShardingsComputeWhatTheUnshardedFunctionComputes) {
  const std::vector<Tree> args = {params(8), full({16, 4}, 0.5, DType::f32)};
  const Array plain = jit(affine_sum, {}, "plain")(args).leaf();
  const Array placed = with_shardings({replicated(), sharded()})(args).leaf();
  EXPECT_EQ(placed.to_floats(), plain.to_floats());
}

TEST(JitShardings, ACollectiveInsideJitHasNoAxisToReduceOver) {
  // jit binds no axis names, whatever the shardings say: seed 002 §2.2's lax.pmean(grads,
  // axis_name='data') inside the sharded jit is JAX's unbound axis name error.
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>{sharded()};
  const Jitted f =
      jit([](const std::vector<Tree>& args) { return Tree(pmean(args[0].leaf(), "data")); },
          options, "pmean_in_jit");
  EXPECT_THAT(error_of(f, {full({16}, 1.0, DType::f32)}), HasSubstr("unbound axis name: data"));
}

TEST(JitShardings, ASpecNamingAnAxisTheMeshLacksIsRefused) {
  EXPECT_THROW(NamedSharding(data_mesh(), PartitionSpec{{"batch"}}), EngineError);
}

}  // namespace
}  // namespace pmap_engine
