// The engine trainer on a layers model, end to end on real Fashion-MNIST: the run directory
// records device 0's BatchNorm statistics beside its parameters and gradients under the Flax
// names, the statistics are Flax's running average over the batches device 0 read (computed
// here by hand from the sampler's plan), the replicas' parameters agree, and the model is
// evaluated in evaluation mode on the test set: its test loss is that of one forward of the
// whole test set with device 0's final parameters and statistics, though the trainer sends
// its batches through both devices.
#include <gtest/gtest.h>

#include <cmath>

#include "layers_case.h"
#include "parity/common/dataset.h"
#include "parity/common/distributed_sampler.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "models/layer_model.h"
#include "parity/engine_trainer/case_model.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"

namespace parity::engine_trainer {
namespace {

constexpr int64_t kSteps = 3;
constexpr double kMomentum = 0.9;

const char* kLayers =
    "  { kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5 },\n"
    "  { kind = \"conv\", features = 2, kernel = [3, 3], strides = [2, 2], padding = \"SAME\" },\n"
    "  { kind = \"relu\" },\n"
    "  { kind = \"global_avg_pool\" },\n"
    "  { kind = \"dense\", features = 10 },\n";

const char* kSections =
    "[parallel]\nreplicas = 2\n\n[data]\nper_replica_batch = 16\n\n"
    "[train]\nsteps = 3\noptimizer = \"sgd\"\nlr = 0.1\nmomentum = 0.9\nrecord_steps = [0, -1]\n";

// The tensors recorded under `prefix` ("params/"), named without it.
NamedTensors recorded_under(const NamedTensors& tensors, const std::string& prefix) {
  NamedTensors out;
  for (const auto& [name, tensor] : tensors) {
    if (name.rfind(prefix, 0) == 0) out.emplace(name.substr(prefix.size()), tensor);
  }
  return out;
}

// The mean cross-entropy of the test set in one forward, from the recorded final tensors.
double test_loss_in_one_batch(const CaseSpec& spec, const NamedTensors& tensors) {
  const std::string separator = name_separator(spec.model);
  const pe::Tree params = params_from_tensors(recorded_under(tensors, "params/"), separator);
  const pe::Tree stats = params_from_tensors(recorded_under(tensors, "batch_stats/"), separator);
  const Dataset test = load_case_dataset(spec, "test");
  const pe::Array x =
      pe::Array::from_floats({test.num_samples, test.feature_dim}, test.features);
  const pe::Array y = pe::Array::from_ints(
      {test.num_samples}, std::vector<int32_t>(test.labels.begin(), test.labels.end()));
  const pe::Array outputs = layer_model_apply(spec.model, params, stats, x, false).outputs;
  return pe::mean(pe::softmax_cross_entropy_with_integer_labels(outputs, y)).item();
}

TEST(LayerTrainer, RecordsDeviceZerosRunningStatisticsAndEvaluatesWithThem) {
  parity::testing::TempDir dir;
  const CaseSpec spec = testing::layers_case(dir, kLayers, kSections);
  write_safetensors(dir.path("init.safetensors"), init_model_params(spec));
  engine_trainer::EngineOptions options;
  options.init_file = dir.path("init.safetensors");
  options.out_dir = dir.path("run");
  options.quiet = true;
  engine_trainer::train(spec, options);

  const RunDir run = read_run_dir(options.out_dir);
  ASSERT_EQ(run.info.status, "complete");
  EXPECT_EQ(run.tensor_steps, (std::vector<int64_t>{0, kSteps - 1}));
  EXPECT_GT(run.info.results.at("test_accuracy"), 0.0);
  EXPECT_TRUE(std::isfinite(run.info.results.at("test_loss")));
  const NamedTensors tensors = read_step_tensors(options.out_dir, kSteps - 1);
  for (const char* name : {"params/Conv_0/kernel", "params/BatchNorm_0/scale",
                           "grads/Dense_0/bias", "batch_stats/BatchNorm_0/mean",
                           "batch_stats/BatchNorm_0/var"}) {
    EXPECT_EQ(tensors.count(name), 1u) << name;
  }
  const HostTensor& digests = tensors.at("replicas/param_digests");
  EXPECT_EQ(digests.data_as<int64_t>()[0], digests.data_as<int64_t>()[1]);

  // Flax's running average over the pixels of the batches device 0 read (the BatchNorm comes
  // first, so it sees the images themselves).
  const Dataset train = load_case_dataset(spec, "train");
  const DistributedBatchPlan plan(case_sampler_options(spec, train.num_samples, 2), 16);
  double mean = 0, var = 1;
  for (int64_t step = 0; step < kSteps; ++step) {
    double sum = 0, sum_of_squares = 0;
    const std::vector<int64_t> ids = plan.step(step).rank_sample_ids[0];
    for (int64_t id : ids) {
      for (int64_t i = 0; i < train.feature_dim; ++i) {
        const double pixel = train.features[static_cast<size_t>(id * train.feature_dim + i)];
        sum += pixel;
        sum_of_squares += pixel * pixel;
      }
    }
    const auto n = static_cast<double>(ids.size()) * static_cast<double>(train.feature_dim);
    const double batch_mean = sum / n;
    mean = kMomentum * mean + (1 - kMomentum) * batch_mean;
    var = kMomentum * var + (1 - kMomentum) * (sum_of_squares / n - batch_mean * batch_mean);
  }
  EXPECT_NEAR(tensors.at("batch_stats/BatchNorm_0/mean").data_as<float>()[0], mean, 1e-5);
  EXPECT_NEAR(tensors.at("batch_stats/BatchNorm_0/var").data_as<float>()[0], var, 1e-5);

  const double test_loss = test_loss_in_one_batch(spec, tensors);
  EXPECT_NEAR(run.info.results.at("test_loss"), test_loss, 1e-6 * test_loss);
}

}  // namespace
}  // namespace parity::engine_trainer
