// Dropout in the engine's layers models, as flax.linen.Dropout draws it (flax/linen/stochastic.py,
// Dropout.__call__; flax/core/scope.py, make_rng): each Dropout module's key is fold_in(dropout
// rng, SHA-1(module path + call count)[:4]), its keep mask bernoulli(key, 1 - rate, x.shape),
// kept values scaled by 1 / (1 - rate). The expected keys and masks are derived here with the
// host threefry (pmap_engine/random.h, bit-exact with jax.random) from fold-in words Python's
// hashlib gave. Then the trainer: every step's and device's key as the case's [rng] derives it,
// recorded in rng.jsonl.
#include <gtest/gtest.h>

#include "layers_case.h"
#include "models/layer_model.h"
#include "models/model.h"
#include "parity/common/flax_rng.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"
#include "pmap_engine/random.h"
#include "pmap_engine/random_ops.h"

namespace parity::engine_trainer {
namespace {

namespace pr = pmap_engine::random;

// hashlib.sha1(b"Dropout_0" + b"\x01").digest()[:4] and the same of
// b"Residual_0" + b"Dropout_0" + b"\x01", big-endian.
constexpr uint32_t kDropout0Word = 0xa1a37726u;
constexpr uint32_t kResidual0Dropout0Word = 0x0897af53u;

const char* kLayers =
    "  { kind = \"flatten\" },\n"
    "  { kind = \"dense\", features = 16 },\n"
    "  { kind = \"dropout\", rate = 0.25 },\n"
    "  { kind = \"residual\", layers = [ { kind = \"dense\", features = 16 },\n"
    "                                   { kind = \"dropout\", rate = 0.5 } ] },\n"
    "  { kind = \"dense\", features = 10 },\n";

// bernoulli(key, keep, shape) as jax.random.bernoulli draws it: uniform(key, shape) < keep.
std::vector<int64_t> expected_keep(pr::Key key, double keep, const pr::Shape& shape) {
  const std::vector<float> u = pr::uniform(key, shape, 0.0f, 1.0f, pr::default_partitionable());
  std::vector<int64_t> mask(u.size());
  for (size_t i = 0; i < u.size(); ++i) mask[i] = u[i] < static_cast<float>(keep);
  return mask;
}

TEST(LayerDropout, EachModuleDrawsFromItsMakeRngKeyAndScalesTheKeptValues) {
  parity::testing::TempDir dir;
  const CaseSpec spec = testing::layers_case(dir, kLayers);
  const pe::Tree params = params_from_tensors(init_model_params(spec), "/");
  const pe::Array x = pe::Array::from_floats({4, 784}, std::vector<float>(4 * 784, 0.5f));
  const pr::Key root = pr::prng_key(7);
  const LayerModelOutput out = layer_model_apply(spec.model, params, pe::Tree::dict({}), x,
                                                 /*train=*/true, pr::key_data(root));
  ASSERT_EQ(out.dropout_draws.entries().size(), 2u);
  const pe::Tree& first = out.dropout_draws["Dropout_0"];
  const pr::Key key = pr::fold_in(root, kDropout0Word);
  EXPECT_EQ(pr::key_from_data(first[0].leaf()), key);
  EXPECT_EQ(first[1].leaf().to_ints(), expected_keep(key, 0.75, {4, 16}));
  const pe::Tree& nested = out.dropout_draws["Residual_0/Dropout_0"];
  EXPECT_EQ(pr::key_from_data(nested[0].leaf()),
            pr::fold_in(root, kResidual0Dropout0Word));

  // The first dropout's output: the dense layer's, kept values / 0.75, the rest 0.
  const LayerModelOutput eval = layer_model_apply(spec.model, params, pe::Tree::dict({}), x,
                                                  /*train=*/false);
  EXPECT_TRUE(eval.dropout_draws.entries().empty());
  const pe::Array dense = pe::dot_general(pe::reshape(x, {4, 784}),
                                          params["Dense_0"]["kernel"].leaf(), {1}, {0}) +
                          params["Dense_0"]["bias"].leaf();
  ModelSpec head = spec.model;
  head.layers.resize(3);  // flatten, dense, dropout
  const pe::Array dropped =
      layer_model_apply(head, params, pe::Tree::dict({}), x, true, pr::key_data(root)).outputs;
  const std::vector<double> before = dense.to_doubles();
  const std::vector<double> after = dropped.to_doubles();
  const std::vector<int64_t> keep = expected_keep(key, 0.75, {4, 16});
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i], keep[i] ? static_cast<double>(static_cast<float>(before[i]) / 0.75f) : 0.0)
        << i;
  }
}

TEST(LayerDropout, FlaxFoldInWordsAreHashlibs) {
  EXPECT_EQ(flax_make_rng_data({"Dropout_0"}, 1), kDropout0Word);
  EXPECT_EQ(flax_make_rng_data({"Residual_0", "Dropout_0"}, 1), kResidual0Dropout0Word);
  EXPECT_EQ(flax_make_rng_data({"Residual_1", "Dropout_0"}, 1), 0x07ac91b1u);
}

// The trainer's keys: step s, device d, site p: fold_in(fold_in(fold_in(PRNGKey(seed), s), d),
// word(p)) for rng.per_step = rng.per_device = "fold_in" (the defaults).
TEST(LayerDropout, TheTrainerRecordsEveryStepsAndDevicesKeysAsTheCaseDerivesThem) {
  parity::testing::TempDir dir;
  const CaseSpec spec = testing::layers_case(
      dir, kLayers,
      "[parallel]\nreplicas = 2\n\n[data]\nper_replica_batch = 8\n\n"
      "[train]\nsteps = 3\noptimizer = \"sgd\"\nlr = 0.1\n\n[rng]\nseed = 5\n");
  write_safetensors(dir.path("init.safetensors"), init_model_params(spec));
  engine_trainer::EngineOptions options;
  options.init_file = dir.path("init.safetensors");
  options.out_dir = dir.path("run");
  options.quiet = true;
  engine_trainer::train(spec, options);

  const RunDir run = read_run_dir(options.out_dir);
  ASSERT_EQ(run.rng.size(), 3u * 2 * 2);  // steps x sites x devices
  const pr::Key root = pr::prng_key(5);
  for (const MaskDraw& draw : run.rng) {
    const uint32_t word = draw.site == "Dropout_0" ? kDropout0Word : kResidual0Dropout0Word;
    const pr::Key expected =
        pr::fold_in(pr::fold_in(pr::fold_in(root, static_cast<uint32_t>(draw.step)),
                                static_cast<uint32_t>(draw.replica)),
                    word);
    ASSERT_TRUE(draw.key.has_value());
    EXPECT_EQ(*draw.key, (RngKeyWords{expected.hi, expected.lo}))
        << draw.step << " " << draw.replica << " " << draw.site;
    EXPECT_EQ(draw.size, 8 * 16);
    EXPECT_EQ(draw.rate, draw.site == "Dropout_0" ? 0.25 : 0.5);
  }
}

}  // namespace
}  // namespace parity::engine_trainer
