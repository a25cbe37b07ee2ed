// The JAX release the engine models (jax_release.h), and every engine text that differs between
// the two releases, one test per text per release. Each expected string is the one JAX raises at
// that tag, from the source the comment names (the jax-ml/jax tags jax-v0.4.38, jax-v0.11.0).
// The engine's own hint after JAX's text ("(pmap_engine: ...") is checked elsewhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "pmap_engine/collectives.h"
#include "pmap_engine/jax_release.h"
#include "pmap_engine/numpy_interop.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/pmap.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const EngineError& error) {
    return error.what();
  }
  return "no error";
}

// ---------------------------------------------------------------------------------------------
// The setting
// ---------------------------------------------------------------------------------------------

TEST(JaxRelease, TheDefaultIsTheNewestTagModelled) {
  EXPECT_EQ(kDefaultJaxRelease, JaxRelease::kV0_11_0);
  EXPECT_EQ(jax_release(), JaxRelease::kV0_11_0);
}

TEST(JaxRelease, NamesRoundTrip) {
  EXPECT_EQ(to_string(JaxRelease::kV0_11_0), "0.11.0");
  EXPECT_EQ(to_string(JaxRelease::kV0_4_38), "0.4.38");
  for (const std::string& name : jax_release_names()) {
    EXPECT_EQ(to_string(parse_jax_release(name)), name);
  }
}

TEST(JaxRelease, AnUnknownNameListsTheAcceptedOnes) {
  EXPECT_EQ(error_of([] { parse_jax_release("0.5.0"); }),
            "unknown JAX release '0.5.0': the engine models 0.11.0, 0.4.38");
}

TEST(JaxRelease, AScopeSetsAndRestoresAndEveryThreadSeesIt) {
  {
    const ScopedJaxRelease outer(JaxRelease::kV0_4_38);
    JaxRelease seen = JaxRelease::kV0_11_0;
    std::thread([&] { seen = jax_release(); }).join();
    EXPECT_EQ(seen, JaxRelease::kV0_4_38);
    {
      const ScopedJaxRelease inner(JaxRelease::kV0_11_0);
      EXPECT_EQ(jax_release(), JaxRelease::kV0_11_0);
    }
    EXPECT_EQ(jax_release(), JaxRelease::kV0_4_38);
  }
  EXPECT_EQ(jax_release(), JaxRelease::kV0_11_0);
}

// ---------------------------------------------------------------------------------------------
// Unbound axis name (pitfall P1): pmap(axis_name='batch') with a collective over 'devices'
// ---------------------------------------------------------------------------------------------

std::string unbound(const std::function<void(const Array&)>& collective) {
  PmapOptions options;
  options.axis_name = "batch";
  options.devices = DeviceSet(2);
  const Pmapped f = pmap(
      [collective](const std::vector<Tree>& args) {
        collective(args[0].leaf());
        return args[0];
      },
      options);
  return error_of([&] { f({Array::from_floats({2, 2}, {1, 2, 3, 4})}); });
}

TEST(JaxReleaseUnboundAxis, Psum_0_4_38) {
  // jax-v0.4.38 jax/_src/lax/parallel.py _check_axis_names (psum_p's abstract eval).
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_THAT(unbound([](const Array& x) { psum(x, "devices"); }),
              StartsWith("unbound axis name: devices (pmap_engine: raised by psum;"));
}

TEST(JaxReleaseUnboundAxis, Pmean_0_4_38) {
  // jax-v0.4.38 jax/_src/lax/parallel.py _check_axis_names (pmean binds psum_p first).
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_THAT(unbound([](const Array& x) { pmean(x, "devices"); }),
              StartsWith("unbound axis name: devices (pmap_engine: raised by pmean;"));
}

TEST(JaxReleaseUnboundAxis, Psum_0_11_0) {
  // jax-v0.11.0 jax/_src/lax/parallel.py _check_axis_names, from
  // _allreduce_effectful_abstract_eval with api_name 'psum'.
  EXPECT_THAT(unbound([](const Array& x) { psum(x, "devices"); }),
              StartsWith("Found an unbound axis name: devices. To fix this, please call psum "
                         "under `jax.shard_map`. (pmap_engine: raised by psum;"));
}

TEST(JaxReleaseUnboundAxis, PmeanAndPmaxNamePsum_0_11_0) {
  // jax-v0.11.0 jax/_src/lax/parallel.py: pmean calls psum; pmax's _pmin_pmax_abstract_eval
  // falls back to _allreduce_effectful_abstract_eval under check_vma=False. Both say 'psum'.
  EXPECT_THAT(unbound([](const Array& x) { pmean(x, "devices"); }),
              HasSubstr("please call psum under `jax.shard_map`."));
  EXPECT_THAT(unbound([](const Array& x) { pmax(x, "devices"); }),
              HasSubstr("please call psum under `jax.shard_map`."));
}

TEST(JaxReleaseUnboundAxis, PpermuteAndAxisIndex_0_11_0) {
  // jax-v0.11.0 jax/_src/lax/parallel.py _raise_to_shaped_abstract_eval ('ppermute') and
  // _axis_index_effectful_abstract_eval ('axis_index').
  EXPECT_THAT(unbound([](const Array& x) { ppermute(x, "devices", {{0, 1}, {1, 0}}); }),
              StartsWith("Found an unbound axis name: devices. To fix this, please call "
                         "ppermute under `jax.shard_map`. (pmap_engine: raised by ppermute;"));
  EXPECT_THAT(unbound([](const Array&) { axis_index("devices"); }),
              StartsWith("Found an unbound axis name: devices. To fix this, please call "
                         "axis_index under `jax.shard_map`. (pmap_engine: raised by "
                         "axis_index;"));
}

TEST(JaxReleaseUnboundAxis, SizeReadsAreTheBareTextAtBothTags) {
  // axis_size, all_gather and psum_scatter read the size first: jax-v0.4.38 and jax-v0.11.0
  // jax/_src/core.py AxisEnv.axis_size (at 0.11.0 through parallel.py _axis_size).
  for (JaxRelease tag : {JaxRelease::kV0_4_38, JaxRelease::kV0_11_0}) {
    const ScopedJaxRelease release(tag);
    EXPECT_THAT(unbound([](const Array&) { axis_size("devices"); }),
                StartsWith("unbound axis name: devices (pmap_engine: raised by axis_size;"));
    EXPECT_THAT(unbound([](const Array& x) { all_gather(x, "devices"); }),
                StartsWith("unbound axis name: devices (pmap_engine: raised by all_gather;"));
  }
}

// ---------------------------------------------------------------------------------------------
// pmap's mapped axis against the device count (pitfall P6)
// ---------------------------------------------------------------------------------------------

// pmap(in_axes=(None, 0)) over 8 devices of (w, x): w broadcast, x mapped.
std::string pmapped_error(int64_t rows) {
  PmapOptions options;
  options.axis_name = "data";
  options.devices = DeviceSet(8);
  options.in_axes = {std::nullopt, 0};
  const Pmapped f = pmap(
      [](const std::vector<Tree>& args) { return Tree(args[0].leaf() + args[1].leaf()); },
      options);
  return error_of([&] {
    f({full({2}, 1.0, DType::f32), full({rows, 2}, 1.0, DType::f32)});
  });
}

TEST(JaxReleasePmapDevices, SixtyFiveOnEight_0_4_38) {
  // jax-v0.4.38 jax/_src/interpreters/pxla.py UnloadedPmapExecutable.from_hlo.
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_THAT(pmapped_error(65), StartsWith("compiling computation that requires 65 logical "
                                            "devices, but only 8 XLA devices are available "
                                            "(num_replicas=65)"));
}

TEST(JaxReleasePmapDevices, SixtyFourOnEight_0_4_38) {
  // jax-v0.4.38 jax/_src/interpreters/pxla.py UnloadedPmapExecutable.from_hlo: any leading
  // axis above the device count, divisible or not.
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_THAT(pmapped_error(64), StartsWith("compiling computation that requires 64 logical "
                                            "devices, but only 8 XLA devices are available "
                                            "(num_replicas=64)"));
}

TEST(JaxReleasePmapDevices, SixtyFiveOnEight_0_11_0) {
  // jax-v0.11.0 jax/_src/pmap.py _get_mesh_devices (all 8 devices) and _cached_shard_map's
  // jit in_shardings; jax/_src/pjit.py pjit_check_aval_sharding re-raises
  // jax/_src/sharding.py _common_shard_shape's IndivisibleError for _fun's flat_args[1].
  EXPECT_THAT(pmapped_error(65),
              StartsWith("One of pjit arguments with pytree key path flat_args[1] was given the "
                         "sharding NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), "
                         "spec=P('data',), memory_kind=device) implies that array axis 0 is "
                         "partitioned 8 times, but the dimension size is 65 (full shape: (65, "
                         "2), per-dimension tiling factors: (8, 1) should evenly divide the "
                         "shape)."));
}

TEST(JaxReleasePmapDevices, SixtyFourOnEight_0_11_0) {
  // jax-v0.11.0 jax/_src/pmap.py _cached_shard_map's _fun squeezes each device's (8, 2) block:
  // jax/_src/lax/lax.py _compute_squeeze_shape.
  EXPECT_THAT(pmapped_error(64),
              StartsWith("cannot select an axis to squeeze out which has size not equal to one, "
                         "got shape=(8, 2) and dimensions=(0,)"));
}

TEST(JaxReleasePmapDevices, FewerRowsThanDevicesRunOnTheFirstOnesAtBothTags) {
  // jax-v0.4.38 pxla.py from_hlo takes local_devices()[:4]; jax-v0.11.0 pmap.py
  // _get_mesh_devices slices [:4]. Both run on the first four devices.
  for (JaxRelease tag : {JaxRelease::kV0_4_38, JaxRelease::kV0_11_0}) {
    const ScopedJaxRelease release(tag);
    EXPECT_EQ(pmapped_error(4), "no error") << to_string(tag);
  }
}

TEST(JaxReleasePmapDevices, NoMappedAxis_0_4_38) {
  // jax-v0.4.38 jax/_src/api.py _mapped_axis_size.
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  PmapOptions options;
  options.devices = DeviceSet(2);
  options.in_axes = {std::nullopt};
  const Pmapped f = pmap([](const std::vector<Tree>& args) { return args[0]; }, options);
  EXPECT_EQ(error_of([&] { f({Array::scalar(1.0)}); }),
            "pmap must have at least one non-None value in in_axes");
}

TEST(JaxReleasePmapDevices, NoMappedAxis_0_11_0) {
  // jax-v0.11.0 jax/_src/pmap.py _mapped_axis_size.
  PmapOptions options;
  options.devices = DeviceSet(2);
  options.in_axes = {std::nullopt};
  const Pmapped f = pmap([](const std::vector<Tree>& args) { return args[0]; }, options);
  EXPECT_EQ(error_of([&] { f({Array::scalar(1.0)}); }),
            "pmap requires at least one argument with a mapped axis.");
}

// ---------------------------------------------------------------------------------------------
// jit's in_shardings (S5, P12)
// ---------------------------------------------------------------------------------------------

NamedSharding data_sharding() {
  return NamedSharding(Mesh(DeviceSet(8), {{"data", 8}}), PartitionSpec{{"data"}});
}

std::string jit_error(std::vector<NamedSharding> shardings, const std::vector<Tree>& args) {
  JitOptions options;
  options.in_shardings = std::vector<ShardingTree>(shardings.begin(), shardings.end());
  const Jitted f = jit([](const std::vector<Tree>& a) { return a[0]; }, options, "f");
  return error_of([&] { f(args); });
}

std::vector<Tree> two_arguments() {
  return {full({16}, 1.0, DType::f32), full({16}, 1.0, DType::f32)};
}

TEST(JaxReleaseJit, WrongLength_0_4_38) {
  // jax-v0.4.38 jax/_src/pjit.py flatten_axis_resources.
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_EQ(jit_error({data_sharding()}, two_arguments()),
            "pjit in_shardings specification must be a tree prefix of the positional arguments "
            "tuple passed to the `pjit`-decorated function. In particular, pjit in_shardings "
            "must either be a None, a PartitionSpec, or a tuple of length equal to the number "
            "of positional arguments. But pjit in_shardings is the wrong length: got a tuple or "
            "list of length 1 for an args tuple of length 2.");
}

TEST(JaxReleaseJit, WrongLength_0_11_0) {
  // jax-v0.11.0 jax/_src/api_util.py flatten_axis_resources.
  EXPECT_EQ(jit_error({data_sharding()}, two_arguments()),
            "pjit in_shardings specification must be a tree prefix of the positional arguments "
            "tuple. In particular, pjit in_shardings must either be a Sharding, a "
            "PartitionSpec, or a tuple of length equal to the number of positional arguments. "
            "But pjit in_shardings is the wrong length: got a tuple or list of length 1 for an "
            "args tuple of length 2.");
}

TEST(JaxReleaseJit, Indivisible_0_4_38) {
  // jax-v0.4.38 jax/_src/pjit.py pjit_check_aval_sharding's own ValueError; the repr is
  // jax/_src/sharding_impls.py NamedSharding.__repr__ with CPU's default memory kind.
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_EQ(jit_error({data_sharding()}, {full({10}, 1.0, DType::f32)}),
            "One of pjit arguments with pytree key path args[0] was given the sharding of "
            "NamedSharding(mesh=Mesh('data': 8), spec=PartitionSpec('data',), "
            "memory_kind=unpinned_host), which implies that the global size of its dimension 0 "
            "should be divisible by 8, but it is equal to 10 (full shape: (10,))");
}

TEST(JaxReleaseJit, Indivisible_0_11_0) {
  // jax-v0.11.0 jax/_src/pjit.py pjit_check_aval_sharding around jax/_src/sharding.py
  // _common_shard_shape's IndivisibleError; the repr is jax/_src/named_sharding.py
  // NamedSharding.__repr__. JAX then names the Python source line, which the engine has not.
  EXPECT_EQ(jit_error({data_sharding()}, {full({10}, 1.0, DType::f32)}),
            "One of pjit arguments with pytree key path args[0] was given the sharding "
            "NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), spec=P('data',), "
            "memory_kind=device) implies that array axis 0 is partitioned 8 times, but the "
            "dimension size is 10 (full shape: (10,), per-dimension tiling factors: (8,) should "
            "evenly divide the shape).");
}

TEST(JaxReleaseJit, ScalarRank_0_4_38) {
  // jax-v0.4.38 jax/_src/pjit.py pjit_check_aval_sharding around
  // jax/_src/sharding_impls.py NamedSharding.check_compatible_aval.
  const ScopedJaxRelease release(JaxRelease::kV0_4_38);
  EXPECT_EQ(jit_error({data_sharding()}, {Array::scalar(3.0)}),
            "One of pjit arguments with pytree key path args[0] is incompatible with its "
            "sharding annotation NamedSharding(mesh=Mesh('data': 8), spec=PartitionSpec('data',), "
            "memory_kind=unpinned_host): Sharding NamedSharding(mesh=Mesh('data': 8), "
            "spec=PartitionSpec('data',), memory_kind=unpinned_host) is only valid for values of "
            "rank at least 1, but was applied to a value of rank 0. For scalars the "
            "PartitionSpec should be P()");
}

TEST(JaxReleaseJit, ScalarRank_0_11_0) {
  // jax-v0.11.0 jax/_src/pjit.py pjit_check_aval_sharding around
  // jax/_src/named_sharding.py NamedSharding.check_compatible_aval.
  EXPECT_EQ(jit_error({data_sharding()}, {Array::scalar(3.0)}),
            "One of pjit arguments with pytree key path args[0] is incompatible with its "
            "sharding annotation NamedSharding(mesh=Mesh('data': 8, axis_types=(Auto,)), "
            "spec=P('data',), memory_kind=device): Sharding NamedSharding(mesh=Mesh('data': 8, "
            "axis_types=(Auto,)), spec=P('data',), memory_kind=device) is only valid for values "
            "of rank at least 1, but was applied to a value of rank 0. For scalars the "
            "PartitionSpec should be P()");
}

// ---------------------------------------------------------------------------------------------
// Texts that are the same at both tags
// ---------------------------------------------------------------------------------------------

TEST(JaxReleaseSameText, ConcretizationAtBothTags) {
  // jax-v0.4.38 and jax-v0.11.0 jax/_src/errors.py ConcretizationTypeError.__init__.
  for (JaxRelease tag : {JaxRelease::kV0_4_38, JaxRelease::kV0_11_0}) {
    const ScopedJaxRelease release(tag);
    const Jitted f = jit([](const std::vector<Tree>& args) {
      args[0].leaf().to_doubles();
      return args[0];
    });
    EXPECT_THAT(error_of([&] { f({Array::scalar(1.0)}); }),
                StartsWith("Abstract tracer value encountered where concrete value is "
                           "expected: "));
  }
}

TEST(JaxReleaseSameText, DotGeneralContractingAtBothTags) {
  // jax-v0.4.38 and jax-v0.11.0 jax/_src/lax/lax.py _dot_general_shape_rule.
  for (JaxRelease tag : {JaxRelease::kV0_4_38, JaxRelease::kV0_11_0}) {
    const ScopedJaxRelease release(tag);
    EXPECT_THAT(error_of([] { matmul(full({2, 3}, 1.0, DType::f32), full({4, 2}, 1.0, DType::f32)); }),
                HasSubstr("dot_general requires contracting dimensions to have the same shape, "
                          "got (3,) and (4,)"));
  }
}

// ---------------------------------------------------------------------------------------------
// NumPy on a tracer (np.sin(x) inside jit, 001 §4.2): the same text at both tags.
// ---------------------------------------------------------------------------------------------

// jax-v0.4.38 and jax-v0.11.0 jax/_src/core.py Tracer.__array__ raises
// TracerArrayConversionError, whose __init__ (jax/_src/errors.py) writes "The numpy.ndarray
// conversion method __array__() was called on " + Tracer._error_repr(): "traced array with
// shape " + the aval's str_short, NumPy's dtype name and the dims joined by ','.
TEST(JaxReleaseNumpyConversion, ATracerGivenToNumpyInBothReleases) {
  const Jitted to_numpy = jit([](const std::vector<Tree>& args) {
    return Tree(full({}, numpy_asarray(args[0].leaf()).front(), DType::f32));
  });
  const Array x = full({4, 3}, 1.5, DType::f32);
  for (JaxRelease release : {JaxRelease::kV0_4_38, JaxRelease::kV0_11_0}) {
    const ScopedJaxRelease scope(release);
    EXPECT_THAT(error_of([&] { to_numpy({Tree(x)}); }),
                StartsWith("The numpy.ndarray conversion method __array__() was called on "
                           "traced array with shape float32[4,3] (pmap_engine: "));
  }
  // A concrete array converts to its values.
  EXPECT_EQ(numpy_asarray(x), std::vector<double>(12, 1.5));
  EXPECT_EQ(numpy_dtype_name(DType::bf16), "bfloat16");
}

}  // namespace
}  // namespace pmap_engine
