// The jit styles' train step (parallel.style jit-dp, jit-fsdp: engine_trainer's jit_train_step.h)
// against the pmap step on the same samples, and what each device holds under each style.
//
// The two steps compute one function in two orders of summation. pmap: each device's mean loss
// over its B samples (an f32 sum of B terms), averaged over the N devices; gradients summed over
// each device's B samples, then pmean'd. jit: one mean over the N*B samples of the global batch
// (XLA's partitioner splits it into the devices' sums and an all-reduce, the same number of
// terms). Summing n positive terms in f32 is within (n - 1) u of the exact sum (u = 2^-24, the
// unit roundoff), and each division adds u, so the step-0 losses (positive cross-entropies,
// per-sample terms computed alike) differ by at most ((N*B - 1) + (B - 1) + 2) u relatively.
// After the first update the parameters differ by rounding too, and the loss, gradients and
// parameters are held to the comparison's f32 tolerances (compare/tolerance.h, measured
// between DDP and pmap), the same bar a jit run must meet against DDP.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "layers_case.h"
#include "models/layer_model.h"
#include "models/model.h"
#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/compare/tolerance.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "parity/engine_trainer/mapped_train_step.h"
#include "pmap_engine/ops.h"
#include "test_files.h"

namespace parity::engine_trainer {
namespace {

namespace et = engine_trainer;

constexpr int64_t kDevices = 2;
constexpr int64_t kBatch = 16;  // per device
constexpr int64_t kSteps = 3;

CaseSpec mlp_case(const std::string& style, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides = {
      "parallel.replicas=" + std::to_string(kDevices),
      "data.per_replica_batch=" + std::to_string(kBatch), "parallel.style=" + style};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_case("mlp2-fmnist", overrides);
}

// Step s's samples: ids s*N*B ... (s+1)*N*B - 1, device d's block d; x [N, B, 784] as pmap takes
// it (or [N*B, 784], the global batch), y likewise.
struct Batch {
  pe::Array x, y;
};
Batch step_batch(const Dataset& data, int64_t step, bool global) {
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int64_t i = step * kDevices * kBatch; i < (step + 1) * kDevices * kBatch; ++i) {
    const auto row = data.features.begin() + i * data.feature_dim;
    x.insert(x.end(), row, row + data.feature_dim);
    y.push_back(static_cast<int32_t>(data.labels[static_cast<size_t>(i)]));
  }
  if (global) {
    return {pe::Array::from_floats({kDevices * kBatch, data.feature_dim}, x),
            pe::Array::from_ints({kDevices * kBatch}, y)};
  }
  return {pe::Array::from_floats({kDevices, kBatch, data.feature_dim}, x),
          pe::Array::from_ints({kDevices, kBatch}, y)};
}

// One style's run of kSteps steps: the loss (global mean) and the gradients and parameters
// after each step, as device 0 holds them (the global values under jit), copied to the host
// (the step donates the parameters it reads).
struct Trajectory {
  std::vector<double> losses;
  std::vector<NamedTensors> grads, params;
};

Trajectory train(const CaseSpec& spec) {
  const et::MappedTrainStep step = et::make_mapped_train_step(spec, pe::DeviceSet(kDevices));
  const et::StepLayout& layout = step.layout();
  const Dataset data = load_case_dataset(spec, "train");
  const bool layers = !spec.model.layers.empty();
  pe::Tree params = params_from_tensors(init_model_params(spec), name_separator(spec.model));
  pe::Tree opt_state = et::step_optimizer(spec).init(params);
  // A layers model's step threads its batch statistics (none without BatchNorm).
  pe::Tree batch_stats = layers ? initial_batch_stats(spec.model, pe::DType::f32) : pe::Tree();
  if (layout.stacked_state) {
    params = et::replicate(params, kDevices);
    opt_state = et::replicate(opt_state, kDevices);
    batch_stats = et::replicate(batch_stats, kDevices);
  }
  // Device 0's row of a stacked leaf, [1:, ...] dropped and the device axis squeezed.
  const auto device_0 = [&](const pe::Tree& tree, bool stacked) {
    if (!stacked) return tree;
    return pe::tree_map(
        [](const pe::Array& leaf) {
          std::vector<int64_t> start(leaf.shape().size(), 0);
          std::vector<int64_t> limit(leaf.shape().begin(), leaf.shape().end());
          limit.front() = 1;
          return pe::reshape(pe::slice(leaf, start, limit),
                             pe::Shape(leaf.shape().begin() + 1, leaf.shape().end()));
        },
        tree);
  };
  Trajectory out;
  for (int64_t s = 0; s < kSteps; ++s) {
    const Batch batch = step_batch(data, s, layout.global_batch);
    std::vector<pe::Tree> args = {params, opt_state, batch.x, batch.y};
    if (layers) args.push_back(batch_stats);
    const pe::Tree result = step(args);
    params = result[0];
    opt_state = result[1];
    if (layers) batch_stats = result[4];
    double loss = 0;
    for (double value : result[2].leaf().to_doubles()) loss += value;
    out.losses.push_back(layout.per_device_results ? loss / kDevices : loss);
    const bool clips = spec.train.clip_grad_norm > 0;
    const std::string separator = name_separator(spec.model);
    out.grads.push_back(tensors_from_params(
        device_0(clips ? result[3][0] : result[3], layout.per_device_results), separator));
    out.params.push_back(tensors_from_params(device_0(params, layout.stacked_state), separator));
  }
  return out;
}

// Every element of every tensor within the comparison's tensor tolerance.
void expect_tensors_close(const NamedTensors& a, const NamedTensors& b, const std::string& what) {
  const compare::Tolerance tolerance = compare::default_tensor_tolerance();
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, tensor_a] : a) {
    const HostTensor& tensor_b = b.at(name);
    ASSERT_EQ(tensor_a.shape, tensor_b.shape) << what << " " << name;
    size_t bad = 0;
    for (size_t i = 0; i < tensor_a.num_elements(); ++i) {
      bad += !compare::is_close(tensor_a.data_as<float>()[i], tensor_b.data_as<float>()[i],
                                tolerance.rtol, tolerance.atol);
    }
    EXPECT_EQ(bad, 0u) << what << " " << name;
  }
}

void expect_same_training(const Trajectory& jit, const Trajectory& pmap) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double step0_bound = ((kDevices * kBatch - 1) + (kBatch - 1) + 2) * u;
  EXPECT_LE(std::abs(jit.losses[0] - pmap.losses[0]), step0_bound * pmap.losses[0])
      << "jit " << jit.losses[0] << " pmap " << pmap.losses[0];
  const compare::Tolerance loss = *compare::assert_close_tolerance("f32");
  for (int64_t s = 0; s < kSteps; ++s) {
    const auto i = static_cast<size_t>(s);
    EXPECT_TRUE(compare::is_close(jit.losses[i], pmap.losses[i], loss.rtol, loss.atol))
        << "step " << s << ": jit " << jit.losses[i] << " pmap " << pmap.losses[i];
    expect_tensors_close(jit.grads[i], pmap.grads[i], "grads at step " + std::to_string(s));
    expect_tensors_close(jit.params[i], pmap.params[i], "params at step " + std::to_string(s));
  }
}

TEST(JitTrainStep, JitDpAndJitFsdpTrainWhatThePmapStepTrains) {
  const Trajectory pmap = train(mlp_case("pmap"));
  for (const std::string style : {"jit-dp", "jit-fsdp"}) {
    SCOPED_TRACE(style);
    expect_same_training(train(mlp_case(style)), pmap);
  }
}

// Micro-batches (a tuple of losses, accumulated gradients) and clipping by global norm (the step
// returns the applied and the reduced gradients, two trees sharded like params).
TEST(JitTrainStep, AccumulationAndClippingTrainWhatThePmapStepTrains) {
  const std::vector<std::string> extra = {"train.clip_grad_norm=0.05"};
  const Trajectory pmap = train(mlp_case("pmap", extra));
  expect_same_training(train(mlp_case("jit-fsdp", extra)), pmap);

  const CaseSpec accumulating = mlp_case("jit-fsdp", {"train.grad_accum_steps=2"});
  const et::MappedTrainStep step = et::make_mapped_train_step(accumulating, pe::DeviceSet(2));
  const pe::Tree params = params_from_tensors(init_mlp_params(
      accumulating.model.widths, accumulating.init.seed, accumulating.init.scale));
  const Dataset data = load_case_dataset(accumulating, "train");
  const Batch first = step_batch(data, 0, true), second = step_batch(data, 1, true);
  const pe::Tree out = step({params, et::step_optimizer(accumulating).init(params),
                             pe::Tree::tuple({first.x, second.x}),
                             pe::Tree::tuple({first.y, second.y})});
  // One loss per micro-batch, each the mean over its global micro-batch: the first is the
  // plain step's loss on the same samples from the same parameters.
  ASSERT_EQ(out[2].children().size(), 2u);
  EXPECT_DOUBLE_EQ(out[2][0].leaf().item(), train(mlp_case("jit-fsdp")).losses[0]);
}

// A layers model (a strided conv, LayerNorm, pooling, a dense head: Flax's modules, no BatchNorm
// nor dropout, which jit styles refuse) takes the same has_aux step, its batch_stats empty.
TEST(JitTrainStep, ALayersModelTrainsWhatThePmapStepTrains) {
  const parity::testing::TempDir dir;
  const auto layers_case = [&](const std::string& style) {
    return testing::layers_case(
        dir,
        "  { kind = \"conv\", features = 4, kernel = [3, 3], strides = [2, 2], padding = "
        "\"SAME\" },\n"
        "  { kind = \"layer_norm\", epsilon = 1e-6 },\n"
        "  { kind = \"relu\" },\n"
        "  { kind = \"global_avg_pool\" },\n"
        "  { kind = \"dense\", features = 10 },\n",
        "[parallel]\nreplicas = " + std::to_string(kDevices) + "\nstyle = \"" + style +
            "\"\n\n[data]\nper_replica_batch = " + std::to_string(kBatch) +
            "\n\n[init]\nscheme = \"flax\"\n");
  };
  const Trajectory pmap = train(layers_case("pmap"));
  expect_same_training(train(layers_case("jit-fsdp")), pmap);
}

TEST(JitTrainStep, JitStylesTrainTheFaithfulProgramOnly) {
  et::EngineStepOptions options;
  options.program = "psum";
  try {
    et::make_mapped_train_step(mlp_case("jit-dp"), pe::DeviceSet(kDevices), options);
    ADD_FAILURE() << "a psum program under jit was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("the engine program is 'psum', a step written for "
                                             "pmap; use parallel.style = \"pmap\""),
              std::string::npos)
        << error.what();
  }
}

// What a device holds between steps, derived by hand for a model whose leaves take every branch
// of jit-fsdp's rule on 8 devices: widths [20, 12, 16] (synthetic-linear, mse), Adam.
//   dense0.kernel [20, 12]  20 % 8 = 4, 12 % 8 = 4: no dimension divides  replicated  240
//   dense0.bias   [12]      12 % 8 = 4                                      replicated   12
//   dense1.kernel [12, 16]  12 % 8 = 4, 16 % 8 = 0: dimension 1 split   P(None, 'data') 12 x 2
//   dense1.bias   [16]      16 % 8 = 0                                      P('data')     2
// params: (240 + 12 + 24 + 2) x 4 bytes = 1112 of the 1840 of a full copy; Adam's mu and nu
// follow their parameters (2 x 1112) and its step count is one replicated i32 (4).
TEST(JitTrainStep, FsdpDevicesHoldTheirBlocksOfEachLeaf) {
  const std::vector<std::string> model = {
      "data.dataset=synthetic-linear", "model.loss=mse", "model.widths=[20, 12, 16]",
      "data.synthetic_num_samples=64", "data.per_replica_batch=8"};
  const auto held = [&](const std::string& style) {
    const CaseSpec spec = load_case("mlp2-fmnist", [&] {
      std::vector<std::string> overrides = model;
      overrides.push_back("parallel.style=" + style);
      return overrides;
    }());
    const pe::Tree params = params_from_tensors(
        init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
    return et::make_mapped_train_step(spec, pe::DeviceSet(8))
        .device_state_bytes(params, et::step_optimizer(spec).init(params));
  };
  const et::DeviceStateBytes fsdp = held("jit-fsdp");
  EXPECT_EQ(fsdp.params, 1112);
  EXPECT_EQ(fsdp.opt_state, 2 * 1112 + 4);
  EXPECT_EQ(fsdp.layout,
            "jit-fsdp over 8 devices: 2 of 4 parameter leaves split; uneven leaves replicated "
            "(no dimension divides by 8): dense0.bias [12], dense0.kernel [20,12]");
  for (const std::string whole : {"jit-dp", "pmap"}) {
    const et::DeviceStateBytes full = held(whole);
    EXPECT_EQ(full.params, 1840) << whole;
    EXPECT_EQ(full.opt_state, 2 * 1840 + 4) << whole;
  }
}

}  // namespace
}  // namespace parity::engine_trainer
