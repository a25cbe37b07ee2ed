// DDP correctness: 8 ranks x 64 samples through the real c10d Reducer must train exactly like
// one process on the same 512 samples per step, because DDP averages gradients over ranks
// (the Reducer divides by world size, then all-reduces the sum) and the mean over 8 equal
// halves of a batch equals the mean over the batch. Only float rounding may differ.
#include <gtest/gtest.h>

#include <cmath>

#include "command.h"
#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/distributed_sampler.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "tensor_compare.h"
#include "trainer.h"

namespace parity::ddp_ref {
namespace {

constexpr int64_t kSteps = 50;

struct ReferenceRun {
  std::vector<double> losses;
  NamedTensors final_params;
};

// Plain single-process LibTorch training on each step's global batch: no process group, no
// Reducer. The global batch is the union of what the DDP ranks read in that step (all their
// micro-batches), rank-major.
ReferenceRun train_single_process(const CaseSpec& spec, const NamedTensors& init) {
  TrainingData data = load_training_data(spec);
  Mlp model(spec.model);
  load_canonical_params(*model, init, "init");
  auto optimizer = make_optimizer(spec.train, model->parameters());
  DistributedSamplerOptions sampler;
  sampler.dataset_size = data.train.num_samples;
  sampler.num_replicas = spec.parallel.replicas;
  sampler.seed = spec.data.seed;
  sampler.shuffle = spec.data.shuffle;
  DistributedBatchPlan plan(sampler, spec.data.per_replica_batch);
  const int64_t micro_batches = spec.train.grad_accum_steps;

  ReferenceRun run;
  for (int64_t step = 0; step < spec.train.steps; ++step) {
    std::vector<int64_t> ids;
    for (int64_t micro = 0; micro < micro_batches; ++micro) {
      for (const auto& rank_ids : plan.step(step * micro_batches + micro).rank_sample_ids) {
        ids.insert(ids.end(), rank_ids.begin(), rank_ids.end());
      }
    }
    auto index = torch::tensor(ids, torch::kInt64);
    optimizer->zero_grad();
    auto loss = compute_loss(spec.model, model->forward(data.train_features.index_select(0, index)),
                             data.train_targets.index_select(0, index));
    loss.backward();
    optimizer->step();
    run.losses.push_back(loss.item<double>());
  }
  run.final_params = export_canonical_params(*model);
  return run;
}

// Trains the case with DDP on thread ranks from `init`, and reads the run directory back.
RunDir train_ddp(const CaseSpec& spec, const NamedTensors& init, const std::string& name) {
  auto dir = testing::fresh_directory(name);
  DdpOptions options;
  options.init_file = dir / "init.safetensors";
  options.out_dir = dir / "run";
  options.quiet = true;
  write_safetensors(options.init_file, init);
  train(spec, options);
  RunDir run = read_run_dir(options.out_dir);
  EXPECT_EQ(run.info.status, "complete");
  EXPECT_EQ(run.steps.size(), static_cast<size_t>(spec.train.steps));
  return run;
}

void expect_losses_match(const RunDir& ddp, const ReferenceRun& reference) {
  ASSERT_EQ(ddp.steps.size(), reference.losses.size());
  for (size_t step = 0; step < reference.losses.size(); ++step) {
    const double expected = reference.losses[step];
    EXPECT_NEAR(ddp.steps[step].loss, expected, 1e-5 * std::abs(expected)) << "step " << step;
  }
  // Learning happened: the comparison is not between two frozen models.
  EXPECT_LT(reference.losses.back(), 0.95 * reference.losses.front());
}

TEST(DdpEquivalence, EightRanksOfSixtyFourEqualOneProcessOnTheGlobalBatch) {
  for (const char* optimizer : {"sgd", "adam"}) {
    SCOPED_TRACE(optimizer);
    const bool sgd = std::string(optimizer) == "sgd";
    CaseSpec spec = load_case(
        "mlp2-fmnist",
        {"train.steps=50", "parallel.replicas=8", "data.per_replica_batch=64",
         std::string("train.optimizer=") + optimizer, sgd ? "train.lr=0.05" : "train.lr=0.001",
         sgd ? "train.momentum=0.9" : "train.momentum=0", "train.record_steps=[49]"});
    NamedTensors init = init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale);
    RunDir ddp = train_ddp(spec, init, std::string("ddp-equivalence-") + optimizer);
    ReferenceRun reference = train_single_process(spec, init);
    expect_losses_match(ddp, reference);

    NamedTensors recorded = read_step_tensors(ddp.dir, kSteps - 1);
    for (const auto& [name, tensor] : reference.final_params) {
      ASSERT_TRUE(recorded.count("params/" + name)) << name;
      EXPECT_LE(testing::max_abs_difference(recorded.at("params/" + name), tensor), 1e-5) << name;
    }
    // Every replica holds the same parameters after the update.
    const HostTensor& digests = recorded.at("replicas/param_digests");
    ASSERT_EQ(digests.num_elements(), 8u);
    for (size_t r = 1; r < 8; ++r) {
      EXPECT_EQ(digests.data_as<int64_t>()[r], digests.data_as<int64_t>()[0]) << "rank " << r;
    }
  }
}

TEST(DdpEquivalence, GradientAccumulationWithNoSyncEqualsTheLargerBatch) {
  // 4 ranks x 2 micro-batches of 32, the first under no_sync(): one optimizer step per two
  // consecutive DataLoader batches of every rank. A single process training on the union of
  // those 256 samples must match (pitfall P9's correct order: accumulate, then update).
  CaseSpec spec = load_case("mlp2-fmnist",
                            {"train.steps=10", "parallel.replicas=4", "data.per_replica_batch=32",
                             "train.grad_accum_steps=2", "train.optimizer=sgd", "train.lr=0.1"});
  NamedTensors init = init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale);
  expect_losses_match(train_ddp(spec, init, "ddp-accumulation"), train_single_process(spec, init));
}

}  // namespace
}  // namespace parity::ddp_ref
