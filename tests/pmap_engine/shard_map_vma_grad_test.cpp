// grad inside shard_map(check_vma=True): JAX's varying-manual-axes autodiff (jax-v0.11.0,
// jax/_src/lax/parallel.py; docs/notebooks/shard_map.md, "Tracking how values vary over manual
// mesh axes"). psum binds psum_invariant, whose transpose is pvary (_psum_invariant_transpose_rule);
// a replicated value meeting a varying one is pvary'd (core.auto_insert_reshard), and pvary
// transposes to psum_invariant (_pvary_transpose_rule).
//
// What that means, checked here against finite differences: the gradient is the gradient of
// the global function the shard_map computes. Its value is the loss itself when the loss is
// invariant (psum'd, pmean'd), and the sum over devices of the per-device losses when it
// varies (grad seeds every device's loss with 1). A replicated parameter's gradient is then
// summed over the devices (and provably invariant: out_specs P() passes check_vma), a split
// parameter's stays local.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "pmap_engine/collectives.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/shard_map.h"

namespace pmap_engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using LocalLoss = std::function<Array(const Array& w, const Array& x)>;

Mesh mesh_4() { return Mesh(DeviceSet(4), {{"x", 4}}); }
// Mesh('x': 2, 'y': 4): the data split over both axes.
Mesh mesh_2x4() { return Mesh(DeviceSet(8), {{"x", 2}, {"y", 4}}); }

const PartitionSpec kReplicated;
const PartitionSpec kSplit({{"x"}});
const PartitionSpec kSplitBoth({{"x", "y"}});

// A nonlinear loss of a device's blocks w [2] and x [2].
Array tanh_loss(const Array& w, const Array& x) { return sum(tanh(w * x + w)); }
Array linear_loss(const Array& w, const Array& x) { return sum(w * x); }

ShardMapOptions options(const PartitionSpec& w_spec, const PartitionSpec& x_spec,
                        std::vector<PartitionSpec> out) {
  ShardMapOptions result;
  result.in_specs = {w_spec, x_spec};
  result.out_specs = std::move(out);
  return result;
}

TreeFunction as_tree(const LocalLoss& loss) {
  return [loss](const std::vector<Tree>& args) {
    return Tree(loss(args[0].leaf(), args[1].leaf()));
  };
}

// grad(loss, argnums=(0, 1)) on every device, returned with the in_specs as out_specs: a
// replicated argument's gradient must be proven invariant for its out_spec P().
ShardMapped grad_step(const Mesh& mesh, const LocalLoss& loss, const PartitionSpec& w_spec,
                      const PartitionSpec& x_spec) {
  return shard_map(
      [loss](const std::vector<Tree>& args) { return grad(as_tree(loss), {0, 1})(args); }, mesh,
      options(w_spec, x_spec, {w_spec, x_spec}));
}

// The function the gradient is of: the loss when it is invariant, else the sum of the
// devices' losses. x is split over every mesh axis, so x_spec lays out one loss per device.
Array global_loss(const Mesh& mesh, const LocalLoss& loss, const PartitionSpec& w_spec,
                  const PartitionSpec& x_spec, bool loss_varies, const std::vector<Array>& in) {
  ShardMapped per_device = shard_map(
      [loss](const std::vector<Tree>& args) {
        return Tree(reshape(loss(args[0].leaf(), args[1].leaf()), {1}));
      },
      mesh, options(w_spec, x_spec, {x_spec}));
  const Array losses = per_device({in[0], in[1]}).leaf();
  return loss_varies ? sum(losses) : reshape(slice(losses, {0}, {1}), {});
}

void expect_true_gradients(const Mesh& mesh, const LocalLoss& loss, const PartitionSpec& w_spec,
                           const PartitionSpec& x_spec, bool loss_varies,
                           const std::vector<Array>& in) {
  const Tree grads = grad_step(mesh, loss, w_spec, x_spec)({in[0], in[1]});
  testing::expect_matches_finite_differences(
      [&](const std::vector<Array>& probe) {
        return global_loss(mesh, loss, w_spec, x_spec, loss_varies, probe);
      },
      in, {grads[0].leaf(), grads[1].leaf()});
}

std::vector<double> ramp(size_t count, double start, double step) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = start + step * static_cast<double>(i);
  return values;
}

const Array kW = Array::from_doubles({2}, {0.3, -0.7});
const Array kWSplit = Array::from_doubles({8}, ramp(8, -0.8, 0.2));
const Array kX = Array::from_doubles({8}, ramp(8, -1.1, 0.3));

LocalLoss psummed(LocalLoss loss) {
  return [loss](const Array& w, const Array& x) { return psum(loss(w, x), "x"); };
}
LocalLoss pmeaned(LocalLoss loss) {
  return [loss](const Array& w, const Array& x) { return pmean(loss(w, x), "x"); };
}

TEST(ShardMapVmaGrad, PsumLossWithReplicatedParamsSumsTheDevicesGradients) {
  expect_true_gradients(mesh_4(), psummed(tanh_loss), kReplicated, kSplit, false, {kW, kX});
}

TEST(ShardMapVmaGrad, LocalLossWithReplicatedParamsAlsoComesBackSummed) {
  // No psum in the loss: w is still pvary'd where it meets x, and pvary transposes to a psum.
  expect_true_gradients(mesh_4(), tanh_loss, kReplicated, kSplit, true, {kW, kX});
}

TEST(ShardMapVmaGrad, PmeanLossWithReplicatedParamsAveragesThem) {
  expect_true_gradients(mesh_4(), pmeaned(tanh_loss), kReplicated, kSplit, false, {kW, kX});
}

TEST(ShardMapVmaGrad, VaryingParamsKeepLocalGradients) {
  expect_true_gradients(mesh_4(), psummed(tanh_loss), kSplit, kSplit, false, {kWSplit, kX});
  expect_true_gradients(mesh_4(), pmeaned(tanh_loss), kSplit, kSplit, false, {kWSplit, kX});
  expect_true_gradients(mesh_4(), tanh_loss, kSplit, kSplit, true, {kWSplit, kX});
}

// all_gather (Varying -> Varying, transposed to psum_scatter: _all_gather_transpose_rule) of a
// product with a replicated w: the gathered loss is the same on every device but typed varying.
Array gathered_loss(const Array& w, const Array& x) {
  const Array all = all_gather(w * x, "x", 0, /*tiled=*/true);
  return pmean(sum(tanh(all) * all), "x");
}

TEST(ShardMapVmaGrad, AllGatherGradientsAreTheGlobalFunctions) {
  expect_true_gradients(mesh_4(), gathered_loss, kReplicated, kSplit, false, {kW, kX});
  expect_true_gradients(mesh_4(), gathered_loss, kSplit, kSplit, false, {kWSplit, kX});
}

// ppermute (its inverse: _ppermute_transpose_rule) and psum_scatter (all_gather:
// _reduce_scatter_transpose_rule), each after the implicit pvary of its operand.
Array shifted_and_scattered_loss(const Array& w, const Array& x) {
  const Array next = ppermute(tanh(w * x), "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
  const Array scattered = psum_scatter(concatenate({w * next, w}, 0), "x", 0, /*tiled=*/true);
  return psum(sum(scattered * scattered), "x");
}

TEST(ShardMapVmaGrad, PpermuteAndPsumScatterGradientsAreTheGlobalFunctions) {
  expect_true_gradients(mesh_4(), shifted_and_scattered_loss, kReplicated, kSplit, false,
                        {kW, kX});
  expect_true_gradients(mesh_4(), shifted_and_scattered_loss, kSplit, kSplit, false,
                        {kWSplit, kX});
}

TEST(ShardMapVmaGrad, TwoAxesSumOverBoth) {
  // x split over ('x', 'y'): w is pvary'd along both axes, so its gradient is summed over all 8
  // devices (two psum_invariants, one per axis).
  const LocalLoss loss = [](const Array& w, const Array& x) {
    return psum(psum(tanh_loss(w, x), "x"), "y");
  };
  const Array x = Array::from_doubles({16}, ramp(16, -1.5, 0.2));
  expect_true_gradients(mesh_2x4(), loss, kReplicated, kSplitBoth, false, {kW, x});
}

// The exact numbers on the linear loss sum(w * x), w = (1, 1), x = 0..7: device d holds
// x_d = (2d, 2d + 1), and d loss / d w on device d is x_d.
const Array kOnes = Array::from_floats({2}, {1, 1});
const Array kIota = Array::from_floats({8}, {0, 1, 2, 3, 4, 5, 6, 7});

std::vector<float> w_gradient(const LocalLoss& loss, const PartitionSpec& w_spec,
                              const Array& w) {
  return grad_step(mesh_4(), loss, w_spec, kSplit)({w, kIota})[0].leaf().to_floats();
}

TEST(ShardMapVmaGrad, ExactGradientsAreJaxs) {
  // Replicated w, psum'd loss: the psum's cotangent 1 reaches each device unsummed (pvary), and
  // the pvary of w sums the devices' x_d: (0+2+4+6, 1+3+5+7) = (12, 16), one value for all
  // (out_specs P()). The data-parallel example of docs/notebooks/shard_map.md relies on this:
  // grad(loss_dp) matches the unsharded loss's gradient "by all-reduce-sums of parameter
  // gradients in the backward pass".
  EXPECT_EQ(w_gradient(psummed(linear_loss), kReplicated, kOnes), (std::vector<float>{12, 16}));
  // The local loss alone gives the same sum: the psum comes from w's pvary, not the loss.
  EXPECT_EQ(w_gradient(linear_loss, kReplicated, kOnes), (std::vector<float>{12, 16}));
  // pmean: the sum / 4.
  EXPECT_EQ(w_gradient(pmeaned(linear_loss), kReplicated, kOnes), (std::vector<float>{3, 4}));
  // Split w: each device keeps x_d (psum'd loss) or x_d / 4 (pmean'd).
  EXPECT_EQ(w_gradient(psummed(linear_loss), kSplit, kIota), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(w_gradient(pmeaned(linear_loss), kSplit, kIota),
            (std::vector<float>{0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75}));
}

// A pmap step moved into shard_map as it is: grads = grad(local loss); grads = pmean(grads). The
// gradient of replicated w is already the sum over devices (invariant, (12, 16) above); pmean is
// psum then a division, and psum of an invariant value first pvary's it (jax-v0.11.0
// jax/_src/lax/parallel.py bind_psum_invariant: pvary over the axes the leaf does not vary
// along), so it adds the 4 equal copies and the division by 4 gives the sum back: (12, 16), 4x
// the mean (3, 4) the pmap step computes. The port silently multiplies the update by the
// device count.
TEST(ShardMapVmaGrad, APmapStepPortedAsItIsPmeansAnAlreadySummedGradient) {
  ShardMapped step = shard_map(
      [](const std::vector<Tree>& args) {
        const Tree grads = grad(as_tree(linear_loss), {0, 1})(args);
        return Tree(pmean(grads[0].leaf(), "x"));
      },
      mesh_4(), options(kReplicated, kSplit, {kReplicated}));
  EXPECT_EQ(step({kOnes, kIota}).leaf().to_floats(), (std::vector<float>{12, 16}));
}

TEST(ShardMapVmaGrad, ReplicatedGradientsOfVaryingValuesAreRefusedAsReplicated) {
  // x's gradient varies: out_specs P() for it is JAX's replication error.
  ShardMapped step = shard_map(
      [](const std::vector<Tree>& args) {
        return grad(as_tree(psummed(linear_loss)), {0, 1})(args);
      },
      mesh_4(), options(kReplicated, kSplit, {kReplicated, kReplicated}));
  EXPECT_THAT([&] { step({kOnes, kIota}); },
              ::testing::ThrowsMessage<EngineError>(HasSubstr(
                  "which implies it is replicated across mesh axis 'x', but it varies along it")));
}

TEST(ShardMapVmaGrad, PrintedProgramShowsPvaryAndPsumInvariant) {
  const std::string text =
      grad_step(mesh_4(), psummed(linear_loss), kReplicated, kSplit).program_text({kOnes, kIota});
  // Types carry the axes a value varies along, as JAX prints them: x's block is f32[2]{V:x}.
  EXPECT_THAT(text, HasSubstr("f32[2]{V:x}")) << text;
  // Forward: w is pvary'd where it meets x (tests/shard_map_test.py test_rewrite_binops), the
  // loss psum'd by psum_invariant. Backward: psum_invariant transposes to pvary
  // (test_fanin_psum_transposes_to_fanout) and pvary to psum_invariant
  // (test_fanout_specs_transpose_to_psum).
  EXPECT_THAT(text, HasSubstr("f32[2]{V:x} = pvary[axes=('x',)] a")) << text;
  EXPECT_THAT(text, HasSubstr("f32[] = psum_invariant[axes=('x',)")) << text;
  EXPECT_THAT(text, HasSubstr("f32[2] = psum_invariant[axes=('x',)")) << text;
  EXPECT_THAT(text, Not(HasSubstr(" psum["))) << text;
  // Under check_vma=False (pmap's semantics) no value is typed and psum stays psum.
  ShardMapOptions unchecked = options(kReplicated, kSplit, {kSplit, kSplit});
  unchecked.check_vma = false;
  const std::string plain =
      shard_map(
          [](const std::vector<Tree>& args) {
            return grad(as_tree(psummed(linear_loss)), {0, 1})(args);
          },
          mesh_4(), unchecked)
          .program_text({kOnes, kIota});
  EXPECT_THAT(plain, Not(HasSubstr("pvary"))) << plain;
  EXPECT_THAT(plain, Not(HasSubstr("{V:"))) << plain;
  EXPECT_THAT(plain, HasSubstr(" psum[")) << plain;
}

TEST(ShardMapVmaGrad, ConstantsMeetingVaryingValuesArePvaryd) {
  // tests/shard_map_test.py test_mul_with_vma_in_types: x * 2 shows pvary[axes=('x',)].
  ShardMapped f = shard_map(
      [](const std::vector<Tree>& args) { return Tree(args[0].leaf() * 2.0); }, mesh_4(),
      [] {
        ShardMapOptions o;
        o.in_specs = {kSplit};
        o.out_specs = {kSplit};
        return o;
      }());
  EXPECT_THAT(f.program_text({kIota}), HasSubstr("pvary[axes=('x',)] 2.0:f32[]"));
  EXPECT_EQ(f({kIota}).leaf().to_floats(),
            (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14}));
}

}  // namespace
}  // namespace pmap_engine
