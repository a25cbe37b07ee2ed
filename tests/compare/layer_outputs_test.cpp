// Layer outputs recorded by both producers (real runs of the `parity` binary, one step of 2
// replicas) and the first diverging layer compare finds in them: the same names and shapes from
// ddp_ref and the engine on cnn-fmnist and vit-fmnist; no diverging layer where the runs agree
// (the ViT), the first BatchNorm where they part by rounding (the ResNet: Flax's statistics in
// f32, torch's in double); and the layer itself where one producer's model differs from the other's the way
// ports go wrong: GELU's tanh form against the exact one, a stride-2 'SAME' window against
// torch's padding=1.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "command.h"
#include "parity/common/layer_intermediates.h"
#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "parity/compare/tolerance.h"
#include "result_lookup.h"
#include "test_files.h"

namespace parity::compare {
namespace {

namespace fs = std::filesystem;
using testing::figure;
using testing::find_check;
using ::testing::HasSubstr;

const std::string kParity = PARITY_EXECUTABLE;

// The command's output, failing the test unless it exits with `expected`.
std::string run_parity(const std::string& arguments, int expected = 0) {
  const testing::CommandResult result = testing::run_command(kParity + " " + arguments, 600);
  EXPECT_EQ(result.exit_code, expected) << arguments << "\n" << result.output;
  return result.output;
}

// Each layer output's name and shape in a run's intermediates file.
std::map<std::string, Shape> recorded_shapes(const fs::path& run) {
  const RunDir dir = read_run_dir(run);
  EXPECT_EQ(dir.intermediate_steps, std::vector<int64_t>{0}) << run;
  std::map<std::string, Shape> shapes;
  if (dir.intermediate_steps.empty()) return shapes;
  for (const auto& [name, tensor] : read_step_intermediates(run, 0)) shapes[name] = tensor.shape;
  return shapes;
}

// What the case's layer list says both producers record for a batch of `batch` samples.
std::map<std::string, Shape> expected_shapes(const CaseSpec& spec, int64_t batch) {
  std::map<std::string, Shape> shapes;
  Shape input = {batch};
  input.insert(input.end(), spec.model.input.begin(), spec.model.input.end());
  shapes[kIntermediatesInput] = input;
  for (const LayerIntermediate& layer : layer_intermediates(spec.model)) {
    Shape shape = {batch};
    shape.insert(shape.end(), layer.shape.begin(), layer.shape.end());
    shapes[kIntermediatesGroup + layer.path] = shape;
  }
  return shapes;
}

// `parity run CASE` (quick: one step of 2 replicas of `batch` samples, tensors at step 0): both
// producers record every layer output of replica 0's batch under the same names and shapes.
// Returns the comparison of the engine's run (A) with ddp_ref's (B), judged with the oracle
// when the run made one.
ComparisonResult run_and_compare(const std::string& case_name, int64_t batch) {
  testing::TempDir out;
  run_parity(
      fmt::format("run {} --set train.steps=1 --set data.per_replica_batch={} "
                  "--set parallel.replicas=2 --set 'train.record_steps=[0]' --out {}",
                  case_name, batch, testing::shell_quote(out.path().string())));
  const fs::path runs = out.path(case_name);
  const auto engine = recorded_shapes(runs / "pmap");
  EXPECT_EQ(engine, recorded_shapes(runs / "ddp"));
  EXPECT_EQ(engine, expected_shapes(load_case(case_name), batch));
  CompareOptions options;
  std::optional<RunDir> oracle;
  if (fs::exists(runs / "oracle")) oracle = read_run_dir(runs / "oracle");
  if (oracle) options.oracle = &*oracle;
  return compare_run_dirs(runs / "pmap", runs / "ddp", options);
}

// vit-fmnist's ViT: every one of its 21 layer outputs agrees within the tensor tolerance.
TEST(LayerOutputs, VitFmnistProducersRecordTheSameOutputsAndAgreeOnThem) {
  const ComparisonResult result = run_and_compare("vit-fmnist", 4);
  const Check& check = find_check(result, "layer_outputs");
  EXPECT_EQ(check.status, CheckStatus::kPass) << check.summary;
  EXPECT_EQ(figure(check, "layers_compared"), 21);
  EXPECT_EQ(figure(check, "layers_out_of_tolerance"), 0);
}

// cnn-fmnist's ResNet: the same names and shapes, and the runs part at the first BatchNorm, from
// its statistics. Flax takes the variance in one pass, E[x^2] - E[x]^2, each mean a sum in f32
// of the channel's 32 x 28 x 28 values one after another (flax/linen/normalization.py,
// _compute_stats with use_fast_variance; linen.h); torch's CPU kernel in two passes,
// accumulated in double (aten/src/ATen/native/cpu/batch_norm_kernel.cpp,
// batch_norm_cpu_collect_stats_contiguous_impl). So each channel's output differs by a shift
// (the mean) and a scale (the variance) of a few f32 roundings of a 25088-value sum, about 7e-5
// at most (measured, Intel AVX-512 and the AVX2 paths alike). The stem conv's outputs before
// it, each a 9-term dot product, agree within that product's rounding (bit for bit with
// OpenBLAS's SkylakeX kernel and oneDNN's AVX-512 one; 4.8e-7 apart on an AVX2 CPU). The oracle
// the case asks for judges it float noise, as it judges the gradients that follow: the check
// warns, the run is equivalent.
TEST(LayerOutputs, CnnFmnistProducersRecordTheSameOutputsAndPartAtTheFirstBatchNormsVariance) {
  const ComparisonResult result = run_and_compare("cnn-fmnist", 32);
  EXPECT_EQ(result.verdict, Verdict::kEquivalent) << result.headline;
  const Check& check = find_check(result, "layer_outputs");
  EXPECT_EQ(check.status, CheckStatus::kWarn) << check.summary;
  EXPECT_EQ(figure(check, "layers_compared"), 35);
  EXPECT_THAT(check.summary, HasSubstr("First diverging layer: 01_batch_norm (inputs agree;"));
  // Two f32 evaluations of a 9-term dot product differ by at most 2 gamma_9 sum|x_k w_k|
  // (Higham §3.1, gamma_n = n u / (1 - n u), u = 2^-24), pixels in [0, 1], and flax's
  // lecun_normal kernel truncated at 2 standard deviations of sqrt(1 / 9) / .8796
  // (common/data/src/flax_init.cpp): |w| < 0.758, so sum|x_k w_k| < 9 x 0.758.
  const double u = std::ldexp(1.0, -24);
  const double gamma_9 = 9 * u / (1 - 9 * u);
  EXPECT_LE(figure(check, "input_max_abs_error"), 2 * gamma_9 * 9 * 0.758);
}

// A Fashion-MNIST case of 2 replicas x 4 samples, one SGD step with tensors and layer outputs
// recorded at step 0, whose [model] layers are `layers`.
std::string case_text(const std::string& layers) {
  return "[case]\nname = \"first-diverging\"\n\n[model]\ninput = [28, 28, 1]\nlayers = [\n" +
         layers +
         "]\n\n[data]\nper_replica_batch = 4\n\n[parallel]\nreplicas = 2\n\n"
         "[train]\nsteps = 1\noptimizer = \"sgd\"\nlr = 0.1\nrecord_steps = [0]\n\n"
         "[init]\nscheme = \"flax\"\n";
}

// The engine trains `engine_layers` (run A), ddp_ref `ddp_layers` (run B), from one init file,
// with `overrides` (--set options) for both: the two models have the same parameters, and differ
// only in what a layer computes.
struct TrainedPair {
  testing::TempDir dir;
  fs::path a, b;
};
void train_pair(TrainedPair& pair, const std::string& engine_layers, const std::string& ddp_layers,
                const std::string& overrides = "") {
  // One case name (the file's), in a folder per producer.
  const fs::path engine_case = pair.dir.path("engine/first-diverging.toml");
  const fs::path ddp_case = pair.dir.path("ddp/first-diverging.toml");
  fs::create_directories(engine_case.parent_path());
  fs::create_directories(ddp_case.parent_path());
  testing::write_bytes(engine_case, case_text(engine_layers));
  testing::write_bytes(ddp_case, case_text(ddp_layers));
  const std::string init = testing::shell_quote(pair.dir.path("init.safetensors").string());
  pair.a = pair.dir.path("pmap-run");
  pair.b = pair.dir.path("ddp-run");
  run_parity(fmt::format("init {} --out {}", engine_case.string(), init));
  run_parity(fmt::format("pmap {} --init {} --out {} --quiet {}", engine_case.string(), init,
                         testing::shell_quote(pair.a.string()), overrides));
  run_parity(fmt::format("ddp {} --init {} --out {} --quiet {}", ddp_case.string(), init,
                         testing::shell_quote(pair.b.string()), overrides));
}

std::string gelu_model(bool approximate) {
  return fmt::format(
      "  {{ kind = \"patch_embed\", patch = [4, 4], features = 16 }},\n"
      "  {{ kind = \"layer_norm\", epsilon = 1e-6 }},\n"
      "  {{ kind = \"dense\", features = 32 }},\n"
      "  {{ kind = \"gelu\", approximate = {} }},\n"
      "  {{ kind = \"mean_tokens\" }},\n"
      "  {{ kind = \"dense\", features = 10 }},\n",
      approximate);
}

// The largest |tanh form - exact form| of GELU over the reals (derived here, in double): outside
// [-10, 10] both forms are x or 0 to double precision.
double gelu_forms_largest_difference() {
  double largest = 0;
  for (double x = -10; x <= 10; x += 1e-4) {
    const double exact = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    const double tanh_form =
        0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    largest = std::max(largest, std::abs(exact - tanh_form));
  }
  return largest;
}

// jax.nn.gelu defaults to the tanh form, torch's GELU to the exact one: a port that keeps both
// defaults differs in that layer alone, its input (the dense before it) equal.
TEST(LayerOutputs, ApproximateAgainstExactGeluIsTheFirstDivergingLayerWithItsInputAgreeing) {
  TrainedPair pair;
  train_pair(pair, gelu_model(true), gelu_model(false));
  const ComparisonResult result = compare_run_dirs(pair.a, pair.b, CompareOptions{});
  const Check& check = find_check(result, "layer_outputs");
  EXPECT_EQ(check.status, CheckStatus::kFail);
  EXPECT_THAT(check.summary, HasSubstr("First diverging layer: 03_gelu (inputs agree;"));
  // Its input agrees within the tensor tolerance; its output differs beyond it, by no more than
  // the two forms ever differ (plus f32 rounding).
  EXPECT_LE(figure(check, "input_max_abs_error"), kTensorAtol);
  EXPECT_GT(figure(check, "max_abs_error"), kTensorAtol);
  EXPECT_LE(figure(check, "max_abs_error"), gelu_forms_largest_difference() + 1e-6);
  // `parity compare` prints it.
  const std::string printed =
      run_parity(fmt::format("compare {} {} --no-color", testing::shell_quote(pair.a.string()),
                             testing::shell_quote(pair.b.string())),
                 1);
  EXPECT_THAT(printed, HasSubstr("First diverging layer: 03_gelu"));
}

// Recording the layer outputs is one more forward outside training: each producer trains the
// same bits whether it takes them at step 0 or at step 2. A capture that left BatchNorm's running
// statistics updated, or drew a dropout mask (advancing ddp_ref's generator or spending an
// engine key), would change step 2's statistics or masks in one of the two runs.
TEST(LayerOutputs, RecordingThemLeavesTrainingBitForBitAsItWas) {
  testing::TempDir dir;
  const fs::path case_file = dir.path("first-diverging.toml");
  testing::write_bytes(case_file,
                       case_text("  { kind = \"conv\", features = 4, kernel = [3, 3], padding = "
                                 "\"SAME\", use_bias = false },\n"
                                 "  { kind = \"batch_norm\", momentum = 0.9, epsilon = 1e-5 },\n"
                                 "  { kind = \"relu\" },\n"
                                 "  { kind = \"dropout\", rate = 0.5 },\n"
                                 "  { kind = \"global_avg_pool\" },\n"
                                 "  { kind = \"dense\", features = 10 },\n"));
  const std::string init = testing::shell_quote(dir.path("init.safetensors").string());
  run_parity(fmt::format("init {} --out {}", case_file.string(), init));
  for (const char* producer : {"pmap", "ddp"}) {
    std::map<std::string, RunDir> runs;
    for (const char* record_steps : {"[0, 2]", "[2]"}) {
      const fs::path out = dir.path(fmt::format("{}-{}", producer, runs.size()));
      // ddp_ref draws its masks from each rank's own generator (rng.ddp = "torch").
      run_parity(fmt::format(
          "{} {} --init {} --out {} --quiet --set train.steps=3 "
          "--set 'train.record_steps={}' --set rng.ddp=torch",
          producer, case_file.string(), init, testing::shell_quote(out.string()), record_steps));
      runs.emplace(record_steps, read_run_dir(out));
    }
    const RunDir& early = runs.at("[0, 2]");
    const RunDir& late = runs.at("[2]");
    EXPECT_EQ(early.intermediate_steps, std::vector<int64_t>{0}) << producer;
    EXPECT_EQ(late.intermediate_steps, std::vector<int64_t>{2}) << producer;
    ASSERT_EQ(early.steps.size(), late.steps.size());
    for (size_t step = 0; step < early.steps.size(); ++step) {
      EXPECT_EQ(early.steps[step].replica_losses, late.steps[step].replica_losses)
          << producer << " step " << step;
    }
    ASSERT_EQ(early.rng.size(), late.rng.size()) << producer;
    for (size_t i = 0; i < early.rng.size(); ++i) {
      EXPECT_EQ(early.rng[i].digest, late.rng[i].digest) << producer << " mask " << i;
    }
    const NamedTensors at_early = read_step_tensors(early.dir, 2);
    const NamedTensors at_late = read_step_tensors(late.dir, 2);
    ASSERT_EQ(at_early.size(), at_late.size()) << producer;
    for (const auto& [name, tensor] : at_early) {
      EXPECT_TRUE(tensor.bytes == at_late.at(name).bytes) << producer << " " << name;
    }
  }
}

// With micro-batches (train.grad_accum_steps = 2) each producer records its first: 4 samples of
// the step's 8 on replica 0, the same ones in both.
TEST(LayerOutputs, WithMicroBatchesBothProducersRecordTheFirstOne) {
  TrainedPair pair;
  const std::string model =
      "  { kind = \"flatten\" },\n  { kind = \"dense\", features = 16 },\n"
      "  { kind = \"tanh\" },\n  { kind = \"dense\", features = 10 },\n";
  train_pair(pair, model, model, "--set train.grad_accum_steps=2");
  for (const fs::path& run : {pair.a, pair.b}) {
    EXPECT_EQ(read_step_intermediates(run, 0).at(kIntermediatesInput).shape, (Shape{4, 28, 28, 1}));
  }
  const ComparisonResult result = compare_run_dirs(pair.a, pair.b, CompareOptions{});
  const Check& check = find_check(result, "layer_outputs");
  EXPECT_EQ(check.status, CheckStatus::kPass) << check.summary;
  ASSERT_FALSE(check.tensors.empty());
  EXPECT_EQ(check.tensors.front().name, kIntermediatesInput);
  EXPECT_EQ(check.tensors.front().max_abs, 0);  // the same samples
}

std::string strided_conv_model(const std::string& padding) {
  return fmt::format(
      "  {{ kind = \"conv\", features = 8, kernel = [3, 3], strides = [2, 2], padding = {}, "
      "use_bias = false }},\n"
      "  {{ kind = \"relu\" }},\n"
      "  {{ kind = \"global_avg_pool\" }},\n"
      "  {{ kind = \"dense\", features = 10 }},\n",
      padding);
}

// Rows (columns alike) of a 3x3 conv at stride 2 on the 28-pixel image:
//   torch's padding=1 pads (1, 1): 14 outputs, output i reads input rows 2i - 1, 2i, 2i + 1;
//   'SAME' (lax.padtype_to_pads): 14 = ceil(28 / 2) outputs, total padding
//   max((14 - 1) * 2 + 3 - 28, 0) = 1, low 0 and high 1, so output i reads rows 2i, 2i + 1, 2i + 2.
// So the SAME output at (i, j) is the window torch's conv would place one input pixel further
// down and right: torch's windows moved by (1, 1) input pixels, half an output pixel at stride 2,
// between torch's outputs (i, j) and (i + 1, j + 1) (no whole move of the output grid matches).
// The check reads B there by bilinear interpolation, which an image's edges make inexact: measured
// relative residuals 0.344 at (1, 1), 0.417 for the next best move (0, 1), 0.499 with no move.
TEST(LayerOutputs, StrideTwoSameAgainstPaddingOneIsTheConvWithAGridShiftOfOneOne) {
  TrainedPair pair;
  train_pair(pair, strided_conv_model("\"SAME\""), strided_conv_model("[[1, 1], [1, 1]]"));
  const ComparisonResult result = compare_run_dirs(pair.a, pair.b, CompareOptions{});
  const Check& check = find_check(result, "layer_outputs");
  EXPECT_EQ(check.status, CheckStatus::kFail);
  EXPECT_THAT(check.summary, HasSubstr("First diverging layer: 00_conv (inputs agree;"));
  EXPECT_EQ(figure(check, "input_max_abs_error"), 0);  // the batch, bit for bit
  EXPECT_EQ(figure(check, "grid_shift_dy"), 1);
  EXPECT_EQ(figure(check, "grid_shift_dx"), 1);
  EXPECT_LT(figure(check, "grid_shift_residual"), figure(check, "grid_shift_next_best_residual"));
  EXPECT_LT(figure(check, "grid_shift_next_best_residual"),
            figure(check, "grid_shift_unshifted_residual"));
}

}  // namespace
}  // namespace parity::compare
