// pmap_engine on one device against ddp_ref with one rank: the same init, the same batches
// (the sampler's global batch of every step), the same optimizer semantics (optax's adam and
// sgd are algebraically torch.optim's Adam and SGD; only float rounding differs). Losses must
// agree within 1e-5 relative at every step and parameters within 1e-4 after 100 steps.
#include <gtest/gtest.h>

#include <cmath>

#include "command.h"
#include "models/model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/distributed_sampler.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "tensor_compare.h"

namespace parity::engine_trainer {
namespace {

constexpr int64_t kSteps = 100;

struct EngineRun {
  std::vector<double> losses;
  NamedTensors final_params;
};

EngineRun train_with_engine(const CaseSpec& spec, const NamedTensors& init) {
  Dataset train = load_case_dataset(spec, "train");
  DistributedSamplerOptions sampler;
  sampler.dataset_size = train.num_samples;
  sampler.num_replicas = 1;
  sampler.seed = spec.data.seed;
  sampler.shuffle = spec.data.shuffle;
  DistributedBatchPlan plan(sampler, spec.data.per_replica_batch);

  pe::Jitted step = make_train_step(spec);
  pe::Tree params = params_from_tensors(init);
  pe::Tree opt_state = make_optimizer(spec.train).init(params);
  EngineRun run;
  for (int64_t s = 0; s < spec.train.steps; ++s) {
    const std::vector<int64_t> ids = plan.step(s).rank_sample_ids[0];
    const int64_t batch = static_cast<int64_t>(ids.size());
    std::vector<float> x(static_cast<size_t>(batch * train.feature_dim));
    std::vector<int32_t> y(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) {
      std::copy_n(train.features.begin() + ids[i] * train.feature_dim, train.feature_dim,
                  x.begin() + i * train.feature_dim);
      y[static_cast<size_t>(i)] = static_cast<int32_t>(train.labels[static_cast<size_t>(ids[i])]);
    }
    pe::Tree out = step({params, opt_state, pe::Array::from_floats({batch, train.feature_dim}, x),
                         pe::Array::from_ints({batch}, y)});
    params = out[0];
    opt_state = out[1];
    run.losses.push_back(out[2].leaf().item());
  }
  run.final_params = tensors_from_params(params);
  EXPECT_EQ(step.cache_stats().misses, 1) << "one trace for every step of equal shapes";
  return run;
}

void expect_engine_matches_ddp(const std::vector<std::string>& overrides, const std::string& name) {
  CaseSpec spec = load_case("mlp2-fmnist", overrides);
  NamedTensors init = init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale);
  auto dir = testing::fresh_directory(name);
  ddp_ref::DdpOptions options;
  options.init_file = dir / "init.safetensors";
  options.out_dir = dir / "ddp";
  options.quiet = true;
  write_safetensors(options.init_file, init);
  ddp_ref::train(spec, options);
  RunDir ddp = read_run_dir(options.out_dir);
  ASSERT_EQ(ddp.steps.size(), static_cast<size_t>(kSteps));

  EngineRun engine = train_with_engine(spec, init);
  for (int64_t s = 0; s < kSteps; ++s) {
    const double expected = ddp.steps[s].loss;
    EXPECT_NEAR(engine.losses[s], expected, 1e-5 * std::abs(expected)) << "step " << s;
  }
  EXPECT_LT(engine.losses.back(), 0.8 * engine.losses.front()) << "the model learned";
  NamedTensors recorded = read_step_tensors(options.out_dir, kSteps - 1);
  for (const auto& [param, tensor] : engine.final_params) {
    const HostTensor& reference = recorded.at("params/" + param);
    ASSERT_EQ(reference.shape, tensor.shape) << param;
    EXPECT_LE(testing::max_abs_difference(tensor, reference), 1e-4) << param;
  }
}

TEST(EngineVsDdp, AdamOnOneDeviceMatchesOneRankDdpFor100Steps) {
  expect_engine_matches_ddp({"parallel.replicas=1", "data.per_replica_batch=512", "train.steps=100",
                             "train.optimizer=adam", "train.lr=0.001", "train.record_steps=[99]"},
                            "engine-vs-ddp-adam");
}

TEST(EngineVsDdp, SgdWithMomentumOnOneDeviceMatchesOneRankDdpFor100Steps) {
  expect_engine_matches_ddp(
      {"parallel.replicas=1", "data.per_replica_batch=512", "train.steps=100",
       "train.optimizer=sgd", "train.lr=0.05", "train.momentum=0.9", "train.record_steps=[99]"},
      "engine-vs-ddp-sgd");
}

}  // namespace
}  // namespace parity::engine_trainer
