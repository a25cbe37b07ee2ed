// DDP over a layers model: the buffer semantics of PyTorch 1.13's DistributedDataParallel
// (torch/nn/parallel/distributed.py: _sync_module_states in the constructor, _sync_buffers
// before a forward while require_forward_param_sync holds) on real Gloo ranks, and 2-rank runs
// of small layers cases end to end: rank 0's BatchNorm statistics recorded, equal parameters
// on every rank, a ViT's reduced gradients (MultiheadAttention's packed projections among
// them) those of one model on both ranks' samples, and what ddp_ref refuses.
#include <gtest/gtest.h>

#include <exception>
#include <thread>

#include "layer_model.h"
#include "layer_model_vectors.h"
#include "model.h"
#include "parity/common/case_spec.h"
#include "parity/common/distributed_sampler.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "process_group.h"
#include "tensor_compare.h"
#include "test_files.h"
#include "trainer.h"

namespace parity::ddp_ref {
namespace {

// Runs fn(rank, group) on `world` threads, each a rank of one Gloo group.
template <typename Fn>
void run_ranks(int64_t world, Fn fn) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        fn(rank, make_gloo_group(store, rank, world, std::chrono::seconds(30)));
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

using Buffers = std::vector<torch::Tensor>;

Buffers snapshot(const std::shared_ptr<CaseModelImpl>& model) {
  Buffers out;
  for (const auto& buffer : model->buffers()) out.push_back(buffer.clone());
  return out;
}

bool same(const Buffers& a, const Buffers& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

ModelSpec batch_norm_model() {
  ModelSpec spec;
  spec.input = {3, 3, 2};
  spec.loss = "mse";
  LayerSpec norm;
  norm.kind = "batch_norm";
  norm.momentum = 0.9;
  norm.epsilon = 1e-5;
  LayerSpec pool;
  pool.kind = "global_avg_pool";
  LayerSpec head;
  head.kind = "dense";
  head.features = 2;
  spec.layers = {norm, pool, head};
  return spec;
}

TEST(DdpBuffers, RankZerosBuffersReachEveryRankWhereDdpBroadcastsThem) {
  const ModelSpec spec = batch_norm_model();
  std::vector<std::map<std::string, Buffers>> seen(2);
  run_ranks(2, [&](int64_t rank, c10::intrusive_ptr<c10d::ProcessGroupGloo> group) {
    auto model = make_case_model(spec);
    {
      torch::NoGradGuard no_grad;
      for (auto& buffer : model->buffers()) buffer.fill_(rank + 3);  // ranks differ at first
    }
    DistributedDataParallel ddp(model->parameters(), model->buffers(), group);
    auto& mine = seen[rank];
    mine["constructed"] = snapshot(model);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
    // One micro-batch: forward with DDP around it, then backward.
    auto micro_batch = [&](bool sync, const std::string& name) {
      ddp.before_forward(sync);
      mine[name + " before"] = snapshot(model);
      auto outputs = model->forward(torch::randn({4, 18}, generator));
      ddp.after_forward(sync);
      mine[name + " after"] = snapshot(model);
      outputs.pow(2).mean().backward();
    };
    // Two steps of gradient accumulation over two micro-batches, the first under no_sync().
    micro_batch(false, "step 0 micro 0");
    micro_batch(true, "step 0 micro 1");
    micro_batch(false, "step 1 micro 0");
  });
  // _sync_module_states: the constructor broadcasts buffers with the parameters.
  EXPECT_TRUE(same(seen[1]["constructed"], seen[0]["constructed"]));
  // Each rank's forward updates its statistics from its own batch.
  EXPECT_FALSE(same(seen[1]["step 0 micro 0 after"], seen[0]["step 0 micro 0 after"]));
  // The no_sync() forward set require_forward_param_sync = False: the next forward (the
  // synchronised last micro-batch) broadcasts nothing; rank 1 keeps its own statistics.
  EXPECT_TRUE(same(seen[1]["step 0 micro 1 before"], seen[1]["step 0 micro 0 after"]));
  EXPECT_FALSE(same(seen[1]["step 0 micro 1 before"], seen[0]["step 0 micro 1 before"]));
  // After a synchronised forward, the next one starts with rank 0's buffers everywhere.
  EXPECT_TRUE(same(seen[1]["step 1 micro 0 before"], seen[0]["step 0 micro 1 after"]));
  EXPECT_TRUE(same(seen[0]["step 1 micro 0 before"], seen[0]["step 0 micro 1 after"]));
}

class DdpLayers : public ::testing::Test {
 protected:
  void SetUp() override { use_case(layer_vectors::kCnn); }

  void use_case(const layer_vectors::ModelVectors& model) {
    const auto path = dir_.path(std::string(model.case_name) + ".toml");
    testing::write_bytes(path, model.case_toml);
    spec_ = load_case(path.string());
    init_ = init_model_params(spec_);
    options_.init_file = dir_.path("init.safetensors");
    options_.out_dir = dir_.path("run");
    options_.quiet = true;
  }

  testing::TempDir dir_;
  CaseSpec spec_;
  NamedTensors init_;
  DdpOptions options_;
};

// BatchNorm's statistics after one training forward of a lone model from the init on `ids`.
NamedTensors lone_batch_stats(const CaseSpec& spec, const NamedTensors& init,
                              const TrainingData& data, const std::vector<int64_t>& ids) {
  auto model = make_case_model(spec.model);
  load_canonical_params(*model, init, "init");
  model->forward(data.train_features.index_select(0, torch::tensor(ids, torch::kInt64)));
  return model->export_batch_stats();
}

TEST_F(DdpLayers, TwoRanksRecordRankZerosBatchStatsAndKeepEqualParams) {
  write_safetensors(options_.init_file, init_);
  train(spec_, options_);
  RunDir run = read_run_dir(options_.out_dir);
  ASSERT_EQ(run.info.status, "complete");
  ASSERT_EQ(run.steps.size(), 3u);
  const ModelShapes shapes = infer_model_shapes(spec_.model.layers, spec_.model.input);
  for (int64_t step = 0; step < 3; ++step) {
    const NamedTensors recorded = read_step_tensors(run.dir, step);
    for (const ModelTensor& stat : shapes.batch_stats) {
      EXPECT_TRUE(recorded.count("batch_stats/" + stat.name)) << stat.name << " step " << step;
    }
    const HostTensor& digests = recorded.at("replicas/param_digests");
    ASSERT_EQ(digests.num_elements(), 2u);
    EXPECT_EQ(digests.data_as<int64_t>()[1], digests.data_as<int64_t>()[0]) << "step " << step;
  }
  // Step 0's statistics come from rank 0's batch alone (each rank normalises with its own).
  const TrainingData data = load_training_data(spec_);
  const DistributedBatchPlan plan(case_sampler_options(spec_, data.train.num_samples, 2),
                                  spec_.data.per_replica_batch);
  const auto ids = plan.step(0).rank_sample_ids;
  const NamedTensors rank0 = lone_batch_stats(spec_, init_, data, ids[0]);
  const NamedTensors rank1 = lone_batch_stats(spec_, init_, data, ids[1]);
  const NamedTensors step0 = read_step_tensors(run.dir, 0);
  double ranks_apart = 0;
  for (const auto& [name, tensor] : rank0) {
    EXPECT_LE(testing::max_abs_difference(step0.at("batch_stats/" + name), tensor), 1e-6) << name;
    ranks_apart = std::max(ranks_apart, testing::max_abs_difference(rank1.at(name), tensor));
  }
  EXPECT_GT(ranks_apart, 1e-3);
}

// Each rank's loss is the mean over its 8 samples, and DDP averages the 2 ranks' gradients: the
// gradient of the mean loss over all 16 samples, which one model computes on them at once.
TEST_F(DdpLayers, TwoRanksReduceAViTsGradientsToOneModelsOnBothRanksSamples) {
  use_case(layer_vectors::kVitClassToken);
  write_safetensors(options_.init_file, init_);
  train(spec_, options_);
  RunDir run = read_run_dir(options_.out_dir);
  ASSERT_EQ(run.info.status, "complete");

  const TrainingData data = load_training_data(spec_);
  const DistributedBatchPlan plan(case_sampler_options(spec_, data.train.num_samples, 2),
                                  spec_.data.per_replica_batch);
  const auto ranks = plan.step(0).rank_sample_ids;
  std::vector<int64_t> ids = ranks[0];
  ids.insert(ids.end(), ranks[1].begin(), ranks[1].end());
  auto model = make_case_model(spec_.model);
  load_canonical_params(*model, init_, "init");
  const auto index = torch::tensor(ids, torch::kInt64);
  compute_loss(spec_.model, model->forward(data.train_features.index_select(0, index)),
               data.train_targets.index_select(0, index))
      .backward();
  const NamedTensors lone = export_canonical_grads(*model);

  const NamedTensors step0 = read_step_tensors(run.dir, 0);
  for (const auto& [name, grad] : lone) {
    ASSERT_TRUE(step0.count("grads/" + name)) << name;
    EXPECT_LE(testing::max_abs_difference(step0.at("grads/" + name), grad),
              1e-5 * std::max(1.0, testing::max_abs(grad)))
        << name;
  }
  EXPECT_TRUE(lone.count("Residual_0/MultiHeadDotProductAttention_0/value/kernel"));
  for (int64_t step = 0; step < 3; ++step) {
    const NamedTensors recorded = read_step_tensors(run.dir, step);
    const HostTensor& digests = recorded.at("replicas/param_digests");
    EXPECT_EQ(digests.data_as<int64_t>()[1], digests.data_as<int64_t>()[0]) << "step " << step;
  }
}

TEST_F(DdpLayers, RefusesAnInitFileWithoutOneOfTheModelsTensors) {
  init_.erase("Residual_0/BatchNorm_2/scale");
  write_safetensors(options_.init_file, init_);
  testing::expect_input_error(
      [&] { train(spec_, options_); },
      {options_.init_file.string(), "Residual_0/BatchNorm_2/scale", "parity init"});
}

// What the engine trains and ddp_ref cannot (a 16-bit layers model neither trains: the case
// checker refuses it when the case loads).
TEST_F(DdpLayers, RefusesSyncBatchNorm) {
  CaseSpec sync = spec_;
  sync.model.layers[1].sync = true;
  testing::expect_input_error([&] { check_options(sync, options_); },
                              {"sync = true", "SyncBatchNorm", "use sync = false"});
}

}  // namespace
}  // namespace parity::ddp_ref
