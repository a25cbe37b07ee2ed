// The pmapped train step of a layers model on 2 devices and real Fashion-MNIST batches: the
// BatchNorm statistics threaded through the steps follow Flax's running average, computed here
// by hand from each device's batches (the BatchNorm sees the images themselves, before any
// parameter); without sync each device keeps its own statistics while the parameters stay
// replicated; with sync every device holds the statistics of the global batch. The step traces
// once, and programs other than pmean refuse layers models.
#include <gtest/gtest.h>

#include <cmath>

#include "layers_case.h"
#include "models/layer_model.h"
#include "models/model.h"
#include "parity/common/init_params.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "pmap_engine/ops.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {
namespace {

constexpr int64_t kDevices = 2;
constexpr int64_t kBatch = 16;  // per device
constexpr int64_t kSteps = 3;
constexpr double kMomentum = 0.9;
constexpr int64_t kPixels = 784;

std::string batch_norm_first(bool sync) {
  return std::string("  { kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5, sync = ") +
         (sync ? "true" : "false") +
         " },\n"
         "  { kind = \"conv\", features = 2, kernel = [3, 3], strides = [2, 2], padding = \"SAME\" },\n"
         "  { kind = \"relu\" },\n"
         "  { kind = \"global_avg_pool\" },\n"
         "  { kind = \"dense\", features = 10 },\n";
}

const char* kTrainSections =
    "[parallel]\nreplicas = 2\n\n[data]\nper_replica_batch = 16\n\n"
    "[train]\noptimizer = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n";

// Running mean and variance of one channel, as flax.linen.BatchNorm updates them.
struct Running {
  double mean = 0, var = 1;
  void update(double batch_mean, double batch_var) {
    mean = kMomentum * mean + (1 - kMomentum) * batch_mean;
    var = kMomentum * var + (1 - kMomentum) * batch_var;
  }
};

// E[x] and E[x^2] over the pixels of `count` images from `first` on.
std::pair<double, double> moments(const std::vector<float>& images, int64_t first,
                                  int64_t count) {
  double sum = 0, sum_of_squares = 0;
  for (int64_t i = first * kPixels; i < (first + count) * kPixels; ++i) {
    sum += images[static_cast<size_t>(i)];
    sum_of_squares += double(images[static_cast<size_t>(i)]) * images[static_cast<size_t>(i)];
  }
  const auto n = static_cast<double>(count * kPixels);
  return {sum / n, sum_of_squares / n};
}

// Device d's value of a tree with a leading device axis (params[d] in JAX).
pe::Tree on_device(const pe::Tree& tree, int64_t d) {
  return pe::tree_map(
      [d](const pe::Array& leaf) {
        std::vector<int64_t> start(leaf.shape().size(), 0), limit = leaf.shape();
        start[0] = d;
        limit[0] = d + 1;
        return pe::reshape(pe::slice(leaf, start, limit),
                           pe::Shape(leaf.shape().begin() + 1, leaf.shape().end()));
      },
      tree);
}

struct StepRun {
  std::vector<pe::Tree> device_params, device_stats;
  std::vector<Running> expected;  // per device
  pe::CacheStats cache;
};

// kSteps steps on real batches: step s gives device d the samples from (s * kDevices + d) *
// kBatch on.
StepRun run_steps(bool sync) {
  parity::testing::TempDir dir;
  const CaseSpec spec = testing::layers_case(dir, batch_norm_first(sync), kTrainSections);
  const GlobalBatch data = global_samples(spec, "pmean", kSteps * kDevices * kBatch);
  const std::vector<float> images = data.x.to_floats();
  engine_trainer::EngineStepOptions options;
  options.check_replicas = true;  // params and opt_state bit-identical on both devices
  const pe::Pmapped step =
      engine_trainer::make_pmap_train_step(spec, pe::DeviceSet(kDevices), options);
  const pe::Tree params = params_from_tensors(init_model_params(spec), "/");
  pe::Tree state[] = {engine_trainer::replicate(params, kDevices),
                      engine_trainer::replicate(make_optimizer(spec.train).init(params), kDevices),
                      engine_trainer::replicate(initial_batch_stats(spec.model, pe::DType::f32),
                                                kDevices)};
  StepRun run;
  run.expected.resize(kDevices);
  Running global;
  for (int64_t s = 0; s < kSteps; ++s) {
    const int64_t first = s * kDevices * kBatch;
    const pe::Array x = pe::reshape(
        pe::slice(data.x, {first, 0}, {first + kDevices * kBatch, kPixels}),
        {kDevices, kBatch, kPixels});
    const pe::Array y = pe::reshape(pe::slice(data.y, {first}, {first + kDevices * kBatch}),
                                    {kDevices, kBatch});
    const pe::Tree out = step({state[0], state[1], x, y, state[2]});
    state[0] = out[0];
    state[1] = out[1];
    state[2] = out[4];
    double global_mean = 0, global_square = 0;
    for (int64_t d = 0; d < kDevices; ++d) {
      const auto [mean, square] = moments(images, first + d * kBatch, kBatch);
      global_mean += mean / kDevices;
      global_square += square / kDevices;
      run.expected[static_cast<size_t>(d)].update(mean, square - mean * mean);
    }
    global.update(global_mean, global_square - global_mean * global_mean);
  }
  if (sync) run.expected.assign(kDevices, global);
  for (int64_t d = 0; d < kDevices; ++d) {
    run.device_params.push_back(on_device(state[0], d));
    run.device_stats.push_back(on_device(state[2], d));
  }
  run.cache = step.cache_stats();
  return run;
}

void expect_running(const pe::Tree& stats, const Running& expected) {
  const double mean = stats["BatchNorm_0"]["mean"].leaf().item();
  const double var = stats["BatchNorm_0"]["var"].leaf().item();
  EXPECT_NEAR(mean, expected.mean, 1e-5 * std::max(1.0, std::abs(expected.mean)));
  EXPECT_NEAR(var, expected.var, 1e-5 * std::max(1.0, std::abs(expected.var)));
}

TEST(LayerTrainStep, WithoutSyncEachDeviceKeepsItsOwnRunningStatistics) {
  const StepRun run = run_steps(/*sync=*/false);
  for (int64_t d = 0; d < kDevices; ++d) {
    expect_running(run.device_stats[static_cast<size_t>(d)], run.expected[static_cast<size_t>(d)]);
  }
  // Different batches, different statistics: the devices drift apart (DDP's ranks too, between
  // the broadcasts of rank 0's buffers).
  EXPECT_GT(std::abs(run.device_stats[0]["BatchNorm_0"]["mean"].leaf().item() -
                     run.device_stats[1]["BatchNorm_0"]["mean"].leaf().item()),
            1e-4);
  // while pmean keeps the parameters replicated, bit for bit.
  EXPECT_EQ(run.device_params[0].structure(), run.device_params[1].structure());
  for (size_t i = 0; i < run.device_params[0].leaves().size(); ++i) {
    EXPECT_EQ(run.device_params[0].leaves()[i].to_floats(),
              run.device_params[1].leaves()[i].to_floats())
        << run.device_params[0].leaf_paths("/")[i];
  }
}

TEST(LayerTrainStep, WithSyncEveryDeviceHoldsTheGlobalBatchsStatistics) {
  const StepRun run = run_steps(/*sync=*/true);
  expect_running(run.device_stats[0], run.expected[0]);
  for (const char* statistic : {"mean", "var"}) {
    EXPECT_EQ(run.device_stats[0]["BatchNorm_0"][statistic].leaf().to_floats(),
              run.device_stats[1]["BatchNorm_0"][statistic].leaf().to_floats())
        << statistic;
  }
}

TEST(LayerTrainStep, TracesOnceForEverySteps) {
  const StepRun run = run_steps(/*sync=*/false);
  EXPECT_EQ(run.cache.misses, 1);
  EXPECT_EQ(run.cache.hits, kSteps - 1);
}

TEST(LayerTrainStep, ProgramsOtherThanPmeanRefuseLayersModels) {
  parity::testing::TempDir dir;
  const CaseSpec spec = testing::layers_case(dir, batch_norm_first(false), kTrainSections);
  engine_trainer::EngineStepOptions options;
  options.program = "psum";
  parity::testing::expect_input_error(
      [&] { engine_trainer::make_pmap_train_step(spec, pe::DeviceSet(kDevices), options); },
      {"case layers: engine program psum runs widths models only",
       "layers models train with engine program pmean"});
}

// What the layer step does not train is refused when the case loads (case_checker.cpp), before
// any step is made.
TEST(LayerTrainStep, AttentionDropoutDropoutWithMicroBatchesAndSixteenBitAreRefusedAtLoad) {
  parity::testing::TempDir dir;
  parity::testing::expect_input_error(
      [&] {
        testing::layers_case(
            dir,
            "  { kind = \"patch_embed\", patch = [7, 7], features = 8 },\n"
            "  { kind = \"attention\", heads = 2, rate = 0.1 },\n"
            "  { kind = \"mean_tokens\" },\n  { kind = \"dense\", features = 10 },\n");
      },
      {"model.layers[1]: attention at", "rate 0.1", "put a dropout layer after the attention"});
  parity::testing::expect_input_error(
      [&] {
        testing::layers_case(dir,
                             "  { kind = \"flatten\" },\n  { kind = \"dropout\", rate = 0.5 },\n"
                             "  { kind = \"dense\", features = 10 },\n",
                             "[train]\ngrad_accum_steps = 2\n");
      },
      {"train.grad_accum_steps: with dropout both producers draw one mask per step",
       "set train.grad_accum_steps = 1"});
  parity::testing::expect_input_error(
      [&] { testing::layers_case(dir, batch_norm_first(false), "[train]\ndtype = \"bf16\"\n"); },
      {"train.dtype: a layers model trains in f32 only", "found \"bf16\""});
}

}  // namespace
}  // namespace parity::engine_trainer
