// What a case may ask for (common/case_limits.h): the memory estimate against a real case's
// init file and figures derived by hand, and absurd sizes refused when the case is loaded,
// naming the key and the reason.
#include "parity/common/case_limits.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/init_params.h"
#include "parity/common/tensor_file.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

TEST(CaseMemory, ParameterBytesAreTheInitFilesTensors) {
  const CaseSpec spec = load_case("mlp2-fmnist");
  testing::TempDir dir;
  const fs::path file = dir.path("init.safetensors");
  write_safetensors(file, init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale), {});
  double init_bytes = 0;
  for (const auto& [name, tensor] : read_safetensors(file).tensors) init_bytes += tensor.bytes.size();
  const CaseMemoryEstimate estimate = estimate_case_memory(spec);
  EXPECT_EQ(estimate.parameter_bytes, init_bytes);
  // By hand: widths [784, 256, 10]: 784*256 + 256 + 256*10 + 10 = 203530 f32 parameters.
  EXPECT_EQ(estimate.parameter_count, 203530);
  EXPECT_EQ(init_bytes, 4 * 203530);
}

TEST(CaseMemory, TheBreakdownFollowsTheDerivation) {
  // mlp2-fmnist: Adam, 8 replicas, 64 samples per replica, f32, Fashion-MNIST.
  const CaseSpec spec = load_case("mlp2-fmnist");
  const CaseMemoryEstimate estimate = estimate_case_memory(spec);
  constexpr double P = 203530;
  EXPECT_EQ(estimate.gradient_bytes, 4 * P);
  EXPECT_EQ(estimate.optimizer_bytes, 8 * P);  // two Adam moments
  // Kept activations: the input (784) and each layer's pre-activation and output (2 x (256 +
  // 10)) for 64 samples, 4 bytes each.
  EXPECT_EQ(estimate.activation_bytes, 64.0 * (784 + 2 * (256 + 10)) * 4);
  // 70000 images of 784 float32 features and an int64 label.
  EXPECT_EQ(estimate.dataset_bytes, 70000.0 * (784 * 4 + 8));
  const double per_replica = 16 * P + 64.0 * 1316 * 4;
  EXPECT_EQ(estimate.per_replica_bytes, per_replica);
  EXPECT_EQ(estimate.pmap_engine_bytes, 8 * per_replica + estimate.dataset_bytes);
  EXPECT_EQ(estimate.ddp_ref_bytes, estimate.pmap_engine_bytes + 8 * 4 * P);  // DDP buckets
  EXPECT_EQ(estimate.required_bytes(), estimate.ddp_ref_bytes);

  // SGD keeps one buffer with momentum, none without; 16-bit activations take 2 bytes.
  EXPECT_EQ(estimate_case_memory(load_case("mlp2-fmnist", {"train.optimizer=sgd",
                                                           "train.momentum=0.9"}))
                .optimizer_bytes,
            4 * P);
  EXPECT_EQ(estimate_case_memory(load_case("mlp2-fmnist", {"train.optimizer=sgd"}))
                .optimizer_bytes,
            0);
  EXPECT_EQ(estimate_case_memory(load_case("mlp2-fmnist", {"train.dtype=bf16"})).activation_bytes,
            estimate.activation_bytes / 2);
}

TEST(CaseMemory, ACaseLargerThanTheMemoryGivenIsRefusedWithItsBreakdown) {
  const CaseSpec spec = load_case("mlp2-fmnist");
  const double required = estimate_case_memory(spec).required_bytes();  // ~250 MiB
  EXPECT_NO_THROW(check_case_memory(spec, required));
  testing::expect_input_error([&] { check_case_memory(spec, required - 1); },
                              {"case mlp2-fmnist", "needs at least", "more than this machine's",
                               "8 replicas x (parameters 795.0 KiB", "optimizer state 1.6 MiB",
                               "dataset 209.9 MiB", "parallel.replicas"});
}

TEST(CaseLimits, AWidthOf4e8IsRefusedForThisMachinesMemory) {
  // 784*4e8 + 4e8 + 4e8*10 + 10 parameters: 1.3 TB of f32 weights per replica alone.
  testing::expect_input_error(
      [] { load_case("mlp2-fmnist", {"model.widths=[784, 400000000, 10]"}); },
      {"case mlp2-fmnist", "needs at least", "TiB of memory", "this machine's",
       format_byte_size(physical_memory_bytes()), "replicas x (parameters"});
}

TEST(CaseLimits, ReplicasBeyondTheMemoryMetersSlotsAreRefused) {
  testing::expect_input_error([] { load_case("mlp2-fmnist", {"parallel.replicas=100000"}); },
                              {"--set parallel.replicas=100000", "expected an integer <= 1024",
                               "found 100000", "per-rank slots"});
  EXPECT_NO_THROW(load_case("mlp2-fmnist", {"parallel.replicas=1024"}));
}

TEST(CaseLimits, StepsAreCappedSoThatARunEnds) {
  testing::expect_input_error(
      [] { load_case("mlp2-fmnist", {"train.steps=9223372036854775807"}); },
      {"train.steps: expected an integer <= 10000000", "found 9223372036854775807",
       "a cap so that every run ends"});
  EXPECT_NO_THROW(load_case("mlp2-fmnist", {"train.steps=10000000"}));
  // The batches read (steps x micro-batches) are capped too.
  testing::expect_input_error(
      [] { load_case("mlp2-fmnist", {"train.steps=1000", "train.grad_accum_steps=10001"}); },
      {"train.grad_accum_steps", "1000 steps x 10001 micro-batches", "10000000 batches"});
}

TEST(CaseLimits, TwoHundredThousandLayersAreRefusedWithAShortMessage) {
  std::string widths = "model.widths=[784";
  for (int i = 0; i < 199999; ++i) widths += ", 1";
  widths += ", 10]";  // 200001 widths: 200000 layers
  testing::expect_input_error([&] { load_case("mlp2-fmnist", {widths}); },
                              {"model.widths: 200000 layers, more than the 1024",
                               "use at most 1025 widths", "characters)"});
  try {
    load_case("mlp2-fmnist", {widths});
  } catch (const InputError& error) {
    EXPECT_LT(std::string(error.what()).size(), 600u) << "the override is cut, not repeated";
  }
  std::string deepest = "model.widths=[784";
  for (int i = 0; i < 1023; ++i) deepest += ", 1";
  EXPECT_NO_THROW(load_case("mlp2-fmnist", {deepest + ", 10]"}));  // exactly 1024 layers
}

TEST(CaseLimits, EveryShippedCaseFitsTheBounds) {
  for (const CaseSpec& spec : list_cases()) {
    EXPECT_LE(spec.parallel.replicas, kMaxCaseReplicas) << spec.name;
    EXPECT_LE(estimate_case_memory(spec).required_bytes(), physical_memory_bytes()) << spec.name;
    EXPECT_LE(case_model_depth(spec.model), kMaxCaseLayers) << spec.name;
    const CaseComputeEstimate compute = estimate_case_compute(spec);
    EXPECT_LE(compute.step_flops, kMaxCaseFlops) << spec.name;
    EXPECT_LE(compute.eval_flops, kMaxCaseFlops) << spec.name;
  }
}

// A layers case written to a temporary file: [model] input and layers, the rest defaults
// (Adam, 8 replicas x 64, f32, Fashion-MNIST).
class LayersCase : public testing::TempDir {
 public:
  std::string write(const std::string& input, const std::string& layers) const {
    const fs::path file = path("layers.toml");
    testing::write_bytes(file, "[model]\ninput = " + input + "\nlayers = [\n" + layers +
                                   "\n]\n[init]\nscheme = \"flax\"\n");
    return file.string();
  }
};

// A 4-feature SAME conv on the images, then a dense head.
const char* const kSmallConvNet = R"(
    { kind = "conv", features = 4, kernel = [3, 3], padding = "SAME" },
    { kind = "relu" }, { kind = "flatten" }, { kind = "dense", features = 10 })";

TEST(CaseMemory, ALayersModelIsEstimatedLayerByLayer) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write("[28, 28, 1]", kSmallConvNet));
  const CaseMemoryEstimate estimate = estimate_case_memory(spec);
  // By hand: conv 3*3*1*4 + 4 = 40; dense 3136*10 + 10 = 31370.
  EXPECT_EQ(estimate.parameter_count, 40 + 31370);
  // Kept per sample: the input 784, then each layer's output: 3136 (conv), 3136 (relu), 3136
  // (flatten), 10 (dense); 64 samples of 4 bytes.
  EXPECT_EQ(estimate.activation_bytes, 64.0 * (784 + 3 * 3136 + 10) * 4);
  // The dense layer: 31370 parameters x (4 + 4 + 8 for Adam) + 64 x 10 x 4 of output; the
  // conv's 40 x 16 + 64 x 3136 x 4 is more.
  EXPECT_EQ(estimate.largest_layer,
            "model.layers[0] (conv at " + dir.path("layers.toml").string() + ":5:5)");
  EXPECT_EQ(estimate.largest_layer_bytes, 40 * 16 + 64.0 * 3136 * 4);
}

TEST(CaseLimits, ADenseLayerOf4e8FeaturesIsRefusedNamingTheLayer) {
  LayersCase dir;
  const std::string file = dir.write("[784]", R"(
    { kind = "dense", features = 400000000 }, { kind = "dense", features = 10 })");
  // 784*4e8 + 4e8 parameters, 16 bytes each with Adam: 4.6 TiB per replica for that layer.
  testing::expect_input_error([&] { load_case(file); }, {"needs at least", "TiB of memory",
                                                         "the largest layer, "
                                                         "model.layers[0] (dense at " +
                                                             file +
                                                             ":5:5), holds 4.7 TiB "
                                                             "per replica",
                                                         "use fewer features"});
}

TEST(CaseLimits, AConvPaddedBy100000IsRefusedNamingTheLayer) {
  LayersCase dir;
  const std::string file = dir.write("[28, 28, 1]", R"(
    { kind = "conv", features = 16, kernel = [3, 3], padding = [[100000, 100000], [100000, 100000]] },
    { kind = "global_avg_pool" }, { kind = "dense", features = 10 })");
  testing::expect_input_error(
      [&] { load_case(file); },
      {"needs at least", "the largest layer, model.layers[0] (conv at", "less padding"});
}

TEST(CaseCompute, TheOperationsAreCountedLayerByLayer) {
  LayersCase dir;
  const CaseSpec spec = load_case(dir.write("[28, 28, 1]", kSmallConvNet));
  const CaseComputeEstimate estimate = estimate_case_compute(spec);
  // conv: 2 x (28*28*4 outputs) x (3*3*1 multiply-adds each); relu and flatten one per value;
  // dense 2 x 3136 x 10.
  const double conv = 2.0 * 3136 * 9;
  EXPECT_EQ(estimate.forward_flops, conv + 3136 + 3136 + 2.0 * 3136 * 10);
  EXPECT_EQ(estimate.largest_layer_flops, 2.0 * 3136 * 10);
  // 8 replicas x 64 samples, forward and backward (3 forwards); 10000 test samples.
  EXPECT_EQ(estimate.step_flops, 3 * estimate.forward_flops * 512);
  EXPECT_EQ(estimate.eval_flops, estimate.forward_flops * 10000);
}

TEST(CaseCompute, AStepOrAnEvaluationBeyondTheBoundIsRefusedNamingTheLayer) {
  LayersCase dir;
  // A 28x28 SAME conv of 256 to 256 channels: 2 x 28*28*256 x 28*28*256 = 8.06e10 operations
  // per sample, in 0.8 GiB of parameters and their Adam state.
  const std::string file = dir.write("[28, 28, 1]", R"(
    { kind = "conv", features = 256, kernel = [1, 1], padding = "SAME" },
    { kind = "conv", features = 256, kernel = [28, 28], padding = "SAME" },
    { kind = "global_avg_pool" }, { kind = "dense", features = 10 })");
  // 3 x 512 samples a step: 1.24e14.
  testing::expect_input_error(
      [&] {
        load_case(file, {"parallel.replicas=1", "data.per_replica_batch=512"});
      },
      {"a training step needs 1.24e+14 floating-point operations", "more than the 1e+14",
       "of which model.layers[1] (conv at " + file + ":6:5) takes 8.06e+10", "or a smaller batch"});
  // 3 samples a step, but the test split's 10000: 8.06e14.
  testing::expect_input_error(
      [&] {
        load_case(file, {"parallel.replicas=1", "data.per_replica_batch=1"});
      },
      {"the evaluation on the test split needs 8.06e+14 floating-point operations",
       "model.layers[1] (conv at"});
}

TEST(CaseLimits, NestedLayersCountTowardsTheDepthCap) {
  LayersCase dir;
  // 512 residuals of 1 relu each, and the head: 512 x 2 + 1 = 1025 layers.
  std::string layers;
  for (int i = 0; i < 512; ++i)
    layers += "{ kind = \"residual\", layers = [{ kind = \"relu\" }] },\n";
  const std::string file = dir.write("[784]", layers + "{ kind = \"dense\", features = 10 }");
  testing::expect_input_error([&] { load_case(file); },
                              {"model.layers: 1025 layers (those inside residuals counted), more "
                               "than the 1024",
                               "use at most 1024 layers"});
}

TEST(CaseFiles, ACasePathThatIsALoopOfLinksIsNamed) {
  testing::TempDir dir;
  fs::create_symlink(dir.path("b.toml"), dir.path("a.toml"));
  fs::create_symlink(dir.path("a.toml"), dir.path("b.toml"));
  testing::expect_input_error([&] { load_case(dir.path("a.toml").string()); },
                              {"case file " + dir.path("a.toml").string() + " cannot be read",
                               "Too many levels of symbolic links", "point it at one"});
}

TEST(CaseFiles, ADirectoryNamedLikeACaseFileIsRefusedAsSuch) {
  testing::TempDir dir;
  fs::create_directories(dir.path("x.toml"));
  testing::expect_input_error([&] { load_case(dir.path("x.toml").string()); },
                              {"case file " + dir.path("x.toml").string(), "is a directory",
                               "give the path of a .toml case file"});
}

}  // namespace
}  // namespace parity
