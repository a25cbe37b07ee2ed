// Engine checkpoints (engine_trainer/src/programs/checkpoint.h): a real file on disk that
// restores every leaf bit for bit, Adam's i32 step count included, and refuses what does not fit
// the case.
#include "programs/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/model.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/tensor_file.h"
#include "pmap_engine/ops.h"
#include "test_files.h"

namespace parity::engine_trainer {
namespace {

using ::testing::HasSubstr;

struct TrainedState {
  pe::Tree params, opt_state;
};

// The case's params and Adam state after one real update, so that mu, nu and count are not
// their initial zeros.
TrainedState one_update() {
  const CaseSpec spec = load_case("mlp2-fmnist");
  const pe::Tree params =
      params_from_tensors(init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
  const pe::optim::GradientTransformation adam = make_optimizer(spec.train);
  const pe::Tree grads = pe::tree_map([](const pe::Array& p) { return p * 0.5 + 0.01; }, params);
  auto [updates, state] = adam.update(grads, adam.init(params), params);
  return {pe::optim::apply_updates(params, updates), state};
}

bool same_bits(const pe::Tree& a, const pe::Tree& b) {
  const std::vector<pe::Array> x = a.leaves(), y = b.leaves();
  if (x.size() != y.size() || a.structure() != b.structure()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].dtype() != y[i].dtype() || x[i].shape() != y[i].shape()) return false;
    if (x[i].dtype() == pe::DType::i32 ? x[i].to_ints() != y[i].to_ints()
                                       : x[i].to_doubles() != y[i].to_doubles()) {
      return false;
    }
  }
  return true;
}

TEST(Checkpoint, RestoresEveryLeafBitForBitWithTheStepAndDeviceCount) {
  testing::TempDir dir;
  const TrainedState trained = one_update();
  const auto file = dir.path("ckpt/step_000100.safetensors");
  save_checkpoint(file, {100, 8, trained.params, trained.opt_state});

  const Checkpoint restored = load_checkpoint(file, trained.params, trained.opt_state);
  EXPECT_EQ(restored.step, 100);
  EXPECT_EQ(restored.device_count, 8);
  EXPECT_TRUE(same_bits(restored.params, trained.params));
  EXPECT_TRUE(same_bits(restored.opt_state, trained.opt_state));
  // Adam's count stays an i32 (optax's ScaleByAdamState.count), not a float.
  bool has_i32 = false;
  for (const pe::Array& leaf : restored.opt_state.leaves())
    has_i32 |= leaf.dtype() == pe::DType::i32;
  EXPECT_TRUE(has_i32);
  EXPECT_EQ(read_safetensors(file).metadata.at("format"), "parity-checkpoint");
}

TEST(Checkpoint, AFileForAnotherModelOrNotACheckpointIsRefusedByName) {
  testing::TempDir dir;
  const TrainedState trained = one_update();
  const auto file = dir.path("step_000001.safetensors");
  save_checkpoint(file, {1, 8, trained.params, trained.opt_state});

  const CaseSpec wider = load_case("mlp2-fmnist", {"model.widths=[784,128,10]"});
  const pe::Tree other =
      params_from_tensors(init_mlp_params(wider.model.widths, wider.init.seed, wider.init.scale));
  try {
    load_checkpoint(file, other, make_optimizer(wider.train).init(other));
    ADD_FAILURE() << "a checkpoint of another model was accepted";
  } catch (const InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr(file.string() + ": tensor 'params/dense0.bias' is F32 "));
    EXPECT_THAT(error.what(), HasSubstr("saved from another model"));
  }

  const auto init = dir.path("init.safetensors");
  write_safetensors(init, init_mlp_params(wider.model.widths, wider.init.seed, wider.init.scale));
  EXPECT_THAT([&] { load_checkpoint(init, trained.params, trained.opt_state); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("not a parity checkpoint")));
}

}  // namespace
}  // namespace parity::engine_trainer
