// PyTorch and Flax weight files mapped onto canonical names (interop/param_names.h), compared
// (`parity tensors diff`) and imported into a run directory (`parity import tensors`).
// The torch files are real state_dicts: tests/data/weights/make_weights.py saved them with
// Debian's python3-torch, and the MLP test has torch write one at test time. The Flax-layout
// files are written with numpy in the layout flax/linen documents (JAX is not installable here).
#include "parity/interop/tensor_import.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/compare/tensor_diff.h"
#include "parity/interop/metrics_import.h"
#include "parity/interop/param_names.h"
#include "test_files.h"

namespace parity::interop {
namespace {

namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const fs::path kWeightsDir = PARITY_WEIGHTS_DIR;
// Debian's interpreter, where scripts/install-deps.sh installs python3-torch.
constexpr const char* kPython = "/usr/bin/python3";

std::string parity(const std::string& arguments) {
  return std::string(PARITY_EXECUTABLE) + " " + arguments;
}

TEST(ParamNames, TorchAndFlaxFilesOfTheSameCnnMapOntoEachOtherWithNoUnmatchedNames) {
  const CanonicalParams torch =
      to_canonical_params(read_tensor_file(kWeightsDir / "torch_cnn.npz"), ParamNaming::kAuto, "");
  const CanonicalParams flax =
      to_canonical_params(read_tensor_file(kWeightsDir / "flax_cnn.npz"), ParamNaming::kAuto, "");
  EXPECT_EQ(torch.naming, ParamNaming::kTorch);
  EXPECT_EQ(flax.naming, ParamNaming::kFlax);
  const NameComparison names = compare_param_names(torch.tensors, flax.tensors);
  EXPECT_TRUE(names.all_matched()) << format_unmatched(names, "torch", &torch, "flax", &flax);
  EXPECT_THAT(names.matched, ElementsAre("batchnorm0.bias", "batchnorm0.mean", "batchnorm0.scale",
                                         "batchnorm0.var", "conv0.bias", "conv0.kernel",
                                         "dense0.bias", "dense0.kernel", "dense1.bias",
                                         "dense1.kernel", "layernorm0.bias", "layernorm0.scale"));
  ASSERT_EQ(torch.ignored.size(), 1u);
  EXPECT_EQ(torch.ignored[0].source, "1.num_batches_tracked");
  // Same values too: the transposes and axis moves are the ones numpy made.
  for (const compare::TensorDelta& delta :
       compare::diff_tensor_sets(torch.tensors, flax.tensors, "torch", "flax", 0, 0)) {
    EXPECT_EQ(delta.max_abs, 0) << delta.name;
  }
  EXPECT_EQ(torch.tensors.at("conv0.kernel").shape, (Shape{3, 2, 3, 4}));  // (H, W, in, out)
}

TEST(ParamNames, ModulesAreNumberedInNaturalOrderPerKind) {
  NamedTensors source;
  for (const char* name : {"fc10.weight", "fc2.weight", "fc1.weight", "norm.weight"}) {
    source[name] =
        HostTensor::zeros(DType::F32, std::string(name) == "norm.weight" ? Shape{3} : Shape{3, 3});
  }
  const CanonicalParams mapped = to_canonical_params(source, ParamNaming::kAuto, "test");
  std::map<std::string, std::string> canonical_of;
  for (const NameMapping& mapping : mapped.mappings)
    canonical_of[mapping.source] = mapping.canonical;
  EXPECT_EQ(canonical_of["fc1.weight"], "dense0.kernel");
  EXPECT_EQ(canonical_of["fc2.weight"], "dense1.kernel");
  EXPECT_EQ(canonical_of["fc10.weight"], "dense2.kernel");
  EXPECT_EQ(canonical_of["norm.weight"], "layernorm0.scale");
}

TEST(ParamNames, ATorchLinearWeightIsTransposedIntoAKernel) {
  const NamedTensors source = {{"head.weight", HostTensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})}};
  const CanonicalParams mapped = to_canonical_params(source, ParamNaming::kTorch, "test");
  const HostTensor& kernel = mapped.tensors.at("dense0.kernel");
  ASSERT_EQ(kernel.shape, (Shape{3, 2}));
  const float* values = kernel.data_as<float>();
  EXPECT_EQ(std::vector<float>(values, values + 6), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// Swin's relative position bias: a leaf no rule knows.
TEST(ParamNames, LeavesWithNoRuleKeepTheirNamesAndSayWhy) {
  const NamedTensors source = {
      {"attn.relative_position_bias_table", HostTensor::zeros(DType::F32, {6, 2})},
      {"out.weight", HostTensor::zeros(DType::F32, {2, 2})},
  };
  const CanonicalParams mapped = to_canonical_params(source, ParamNaming::kAuto, "test");
  ASSERT_EQ(mapped.unmapped.size(), 1u);
  EXPECT_EQ(mapped.unmapped[0].source, "attn.relative_position_bias_table");
  EXPECT_EQ(mapped.tensors.count("attn.relative_position_bias_table"), 1u);
  const NameComparison names = compare_param_names(
      mapped.tensors, {{"dense0.kernel", HostTensor::zeros(DType::F32, {2, 2})}});
  const std::string table = format_unmatched(names, "file", &mapped, "case", nullptr);
  EXPECT_THAT(table, HasSubstr("attn.relative_position_bias_table (6, 2)"));
  EXPECT_THAT(table, HasSubstr("file 'attn.relative_position_bias_table' kept its name: no rule"));
}

TEST(ParamNames, NamesOfNeitherFrameworkAskForNaming) {
  testing::expect_input_error(
      [] {
        to_canonical_params({{"layer.b", HostTensor::zeros(DType::F32, {2})}}, ParamNaming::kAuto,
                            "w.npz");
      },
      {"w.npz", "cannot tell", "--naming torch"});
}

TEST(ParamNames, NothingToMapIsRefused) {
  testing::expect_input_error([] { to_canonical_params({}, ParamNaming::kTorch, "w.npz"); },
                              {"w.npz: holds no tensors"});
}

// The case's MLP written by real torch (nn.Sequential state_dict, loaded from parity's init
// file) and in Flax's layout by numpy: both map onto the init file, value for value.
TEST(TensorsDiff, TheCasesMlpInTorchAndFlaxLayoutMatchItsInitFile) {
  testing::TempDir dir;
  const fs::path init = dir.path("init.safetensors");
  auto result = testing::run_command(parity("init mlp2-fmnist --out " + init.string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string script = R"(
import json, struct, sys
import numpy as np
import torch
raw = open(sys.argv[1], 'rb').read()
size = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + size])
data = raw[8 + size:]
p = {k: np.frombuffer(data[v['data_offsets'][0]:v['data_offsets'][1]], dtype=np.float32)
        .reshape(v['shape']) for k, v in header.items() if k != '__metadata__'}
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Tanh(), torch.nn.Linear(256, 10))
with torch.no_grad():
    for i, layer in ((0, model[0]), (1, model[2])):
        layer.weight.copy_(torch.tensor(p[f'dense{i}.kernel'].T.copy()))
        layer.bias.copy_(torch.tensor(p[f'dense{i}.bias'].copy()))
np.savez(sys.argv[2], **{k: v.numpy() for k, v in model.state_dict().items()})
np.savez_compressed(sys.argv[3], **{f'params/Dense_{i}/{leaf}': p[f'dense{i}.{leaf}']
                                    for i in (0, 1) for leaf in ('kernel', 'bias')})
)";
  std::ofstream(dir.path("write.py")) << script;
  result = testing::run_command(
      fmt::format("{} {} {} {} {}", kPython, dir.path("write.py").string(), init.string(),
                  dir.path("torch.npz").string(), dir.path("flax.npz").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* file : {"torch.npz", "flax.npz"}) {
    result = testing::run_command(
        parity(fmt::format("tensors diff {} {}", dir.path(file).string(), init.string())));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_THAT(result.output, HasSubstr("4 names matched, 0 unmatched, 0 of 4 compared tensors "
                                         "outside rtol 0 atol 0: same"));
  }
  EXPECT_THAT(result.output, HasSubstr("dense0.kernel <- params/Dense_0/kernel"));
}

TEST(TensorsDiff, AnotherModelIsListedSideBySideAndExitsOne) {
  const auto result = testing::run_command(
      parity(fmt::format("tensors diff {} {}", (kWeightsDir / "torch_wider.npz").string(),
                         (kWeightsDir / "flax_cnn.npz").string())));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("dense0.kernel (24, 16) <- 3.weight | dense0.kernel (24, 8) <- "
                        "params/Dense_0/kernel"));
  EXPECT_THAT(result.output, HasSubstr("dense2.kernel (2, 2) <- 6.weight"));
  // The BatchNorm statistics, the two other names that match, are compared as batch_stats.
  EXPECT_THAT(result.output,
              HasSubstr("5 matched, 2 only in A, 0 only in B, 5 with another shape"));
  EXPECT_THAT(result.output, HasSubstr("parity tensors diff of batch_stats and params: 7 names "
                                       "matched, 7 unmatched, 5 of 7 compared tensors"));
  EXPECT_THAT(result.output, HasSubstr(": DIFFERENT"));
}

// ---- parity import tensors ------------------------------------------------------------------

const std::vector<std::string> kOverrides = {"train.steps=2"};

// The case's initial parameters, on canonical names.
NamedTensors case_init() {
  const CaseSpec spec = load_case("mlp2-fmnist", kOverrides);
  return init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale);
}

// A run directory of mlp2-fmnist (2 steps) as `parity import metrics` makes it.
// A run imported from a log of steps 0 and 1 (and `last_step`, when given).
fs::path imported_metrics_run(const testing::TempDir& dir, std::optional<int64_t> last_step = {}) {
  std::ofstream log(dir.path("log.jsonl"));
  log << "{\"step\": 0, \"loss\": 2.3}\n{\"step\": 1, \"loss\": 2.2}\n";
  if (last_step) log << "{\"step\": " << *last_step << ", \"loss\": 2.1}\n";
  log.close();
  MetricsImport request;
  request.source = dir.path("log.jsonl");
  request.mapping = {{"loss", "loss"}};
  request.out_dir = dir.path("run");
  import_metrics(load_case("mlp2-fmnist", kOverrides), request);
  return request.out_dir;
}

// The case's initial parameters in torch's names and layout under params/ and grads/ (as the
// interop/python helper writes a step), the transposes done here by hand.
NamedTensors torch_named(const NamedTensors& canonical) {
  NamedTensors torch;
  for (int layer = 0; layer < 2; ++layer) {
    const HostTensor& kernel = canonical.at(fmt::format("dense{}.kernel", layer));
    HostTensor weight = HostTensor::zeros(DType::F32, {kernel.shape[1], kernel.shape[0]});
    for (int64_t i = 0; i < kernel.shape[0]; ++i) {
      for (int64_t o = 0; o < kernel.shape[1]; ++o) {
        weight.data_as<float>()[o * kernel.shape[0] + i] =
            kernel.data_as<float>()[i * kernel.shape[1] + o];
      }
    }
    const std::string module = std::to_string(2 * layer);  // nn.Sequential(Linear, Tanh, Linear)
    for (const char* group : {"params/", "grads/"}) {
      torch[group + module + ".weight"] = weight;
      torch[group + module + ".bias"] = canonical.at(fmt::format("dense{}.bias", layer));
    }
  }
  return torch;
}

TEST(TensorImport, AHelpersStepFilesInTorchNamesBecomeTheRunsCanonicalTensors) {
  testing::TempDir dir;
  const fs::path run = imported_metrics_run(dir);
  const NamedTensors init = case_init();
  fs::create_directories(dir.path("log/tensors"));
  write_safetensors(dir.path("log/tensors/step_000001.safetensors"), torch_named(init));

  const auto result = testing::run_command(
      parity(fmt::format("import tensors {} --case mlp2-fmnist --set train.steps=2 --out {}",
                         dir.path("log/tensors").string(), run.string())));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("8 tensors at steps 1 of case mlp2-fmnist, read as torch"));
  EXPECT_THAT(read_run_dir(run).tensor_steps, ElementsAre(1));
  const NamedTensors recorded = read_step_tensors(run, 1);
  for (const auto& [name, tensor] : init) {
    for (const char* group : {"params/", "grads/"}) {
      ASSERT_EQ(recorded.count(group + name), 1u) << group << name;
      EXPECT_EQ(recorded.at(group + name).bytes, tensor.bytes) << group << name;
    }
  }
}

TEST(TensorImport, TensorsOfAnotherModelAreRefusedBeforeAnythingIsWritten) {
  testing::TempDir dir;
  const fs::path run = imported_metrics_run(dir);
  const auto result = testing::run_command(parity(fmt::format(
      "import tensors {} --case mlp2-fmnist --set train.steps=2 --out {} --step 0 --kind params",
      (kWeightsDir / "torch_wider.npz").string(), run.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("do not map onto case mlp2-fmnist's parameters; nothing "
                                       "was written"));
  EXPECT_THAT(result.output, HasSubstr("conv0.kernel (3, 2, 3, 4) <- 0.weight"));
  EXPECT_THAT(
      result.output,
      ContainsRegex("dense0.kernel \\(24, 16\\) <- 3.weight +\\| dense0.kernel \\(784, 256\\) +\\| "
                    "shape differs"));
  EXPECT_TRUE(read_run_dir(run).tensor_steps.empty());
}

TEST(TensorImport, ARunOfAnotherCaseIsRefused) {
  testing::TempDir dir;
  const fs::path run = imported_metrics_run(dir);
  const auto result = testing::run_command(
      parity(fmt::format("import tensors {} --case mlp2-fmnist --out {} --step 0 --kind params",
                         (kWeightsDir / "torch_cnn.npz").string(), run.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("import the tensors into the run directory of the same case"));
}

TEST(TensorImport, AFileWithoutGroupsAsksForKindAndAFileWithoutStepAsksForStep) {
  testing::TempDir dir;
  const fs::path run = imported_metrics_run(dir);
  auto result = testing::run_command(parity(
      fmt::format("import tensors {} --case mlp2-fmnist --set train.steps=2 --out {} --step 0",
                  (kWeightsDir / "torch_cnn.npz").string(), run.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("is under none of 'params/', 'grads/', 'batch_stats/'"));
  result = testing::run_command(parity(
      fmt::format("import tensors {} --case mlp2-fmnist --set train.steps=2 --out {} --kind params",
                  (kWeightsDir / "torch_cnn.npz").string(), run.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("Pass --step N"));
}

// The request `parity import tensors FILE --step STEP` makes, into `run`.
TensorImport single_file(const fs::path& file, int64_t step, const fs::path& run) {
  TensorImport request;
  request.source = file;
  request.step = step;
  request.run_dir = run;
  return request;
}

TEST(TensorImport, StepsANameCannotHoldAreRefusedNamingTheOption) {
  testing::TempDir dir;
  const int64_t last = 999'999'999'999'999'999;
  const fs::path run = imported_metrics_run(dir, last);
  const CaseSpec spec = load_case("mlp2-fmnist", kOverrides);
  const NamedTensors init = case_init();
  write_safetensors(dir.path("step.safetensors"), torch_named(init));
  testing::expect_input_error(
      [&] { import_tensors(spec, single_file(dir.path("step.safetensors"), -1, run)); },
      {"--step: step -1 is negative; steps are 0-based optimizer steps of at most 18 digits (0 "
       "to 999999999999999999)",
       "Fix: pass the 0-based optimizer step the file was saved at"});
  testing::expect_input_error(
      [&] {
        import_tensors(spec, single_file(dir.path("step.safetensors"), 1'000'000'000'000'000'000,
                                         run));
      },
      {"--step: step 1000000000000000000 is beyond what a step_NNNNNN file name holds"});
  EXPECT_TRUE(read_run_dir(run).tensor_steps.empty());
  EXPECT_FALSE(fs::exists(run / "tensors" / "step_-00001.safetensors"));
  // A step the run does not hold is refused, naming those it holds.
  testing::expect_input_error(
      [&] { import_tensors(spec, single_file(dir.path("step.safetensors"), 5, run)); },
      {"--step 5: the run directory", "holds no step 5 (its metrics.jsonl holds steps 0, 1, "
                                      "999999999999999999)"});
  // 18 digits are a step: written, and read back by the run directory's reader.
  import_tensors(spec, single_file(dir.path("step.safetensors"), last, run));
  EXPECT_THAT(read_run_dir(run).tensor_steps, ElementsAre(last));
}

// Parameters and gradients are compared as numbers: an integer tensor of the right shape is
// not one, and neither is a half-precision one compare cannot read.
TEST(TensorImport, TensorsThatAreNotF32OrF64AreRefusedNamingFileTensorAndDtype) {
  testing::TempDir dir;
  const fs::path run = imported_metrics_run(dir);
  const CaseSpec spec = load_case("mlp2-fmnist", kOverrides);
  const NamedTensors init = case_init();
  for (const DType dtype : {DType::I32, DType::BF16, DType::U8}) {
    NamedTensors tensors = torch_named(init);
    HostTensor& bias = tensors.at("grads/2.bias");
    bias = HostTensor::zeros(dtype, bias.shape);
    const fs::path file = dir.path(fmt::format("{}.safetensors", dtype_name(dtype)));
    write_safetensors(file, tensors);
    testing::expect_input_error(
        [&] { import_tensors(spec, single_file(file, 0, run)); },
        {fmt::format("{} (grads): tensor '2.bias' is {}; parameters and gradients must be "
                     "floating point, F32 or F64, to be compared. Save them as float32",
                     file.string(), dtype_name(dtype))});
  }
  EXPECT_TRUE(read_run_dir(run).tensor_steps.empty());
  // F64 is compared as it is.
  NamedTensors tensors = torch_named(init);
  HostTensor wide = HostTensor::zeros(DType::F64, tensors.at("grads/2.bias").shape);
  for (size_t i = 0; i < wide.num_elements(); ++i) {
    wide.data_as<double>()[i] = tensors.at("grads/2.bias").data_as<float>()[i];
  }
  tensors["grads/2.bias"] = wide;
  write_safetensors(dir.path("f64.safetensors"), tensors);
  EXPECT_EQ(import_tensors(spec, single_file(dir.path("f64.safetensors"), 0, run)).num_tensors,
            8u);
}

// A file or a directory with nothing to import is refused, never an import of 0 tensors.
TEST(TensorImport, FilesAndDirectoriesWithNoTensorsAreRefused) {
  testing::TempDir dir;
  const fs::path run = imported_metrics_run(dir);
  auto result = testing::run_command(fmt::format(
      "{} -c \"import numpy as np, sys; np.savez(sys.argv[1])\" {}", kPython,
      dir.path("empty.npz").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  write_safetensors(dir.path("empty.safetensors"), {});
  for (const char* file : {"empty.npz", "empty.safetensors"}) {
    result = testing::run_command(parity(
        fmt::format("import tensors {} --case mlp2-fmnist --set train.steps=2 --out {} --step 0",
                    dir.path(file).string(), run.string())));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output,
                HasSubstr(fmt::format("{}: holds no tensors, so there is nothing to import or "
                                      "compare; save the model's parameters",
                                      dir.path(file).string())));
  }
  fs::create_directories(dir.path("log/tensors"));
  fs::copy_file(dir.path("empty.npz"), dir.path("log/tensors/step_000001.npz"));
  result = testing::run_command(parity(
      fmt::format("import tensors {} --case mlp2-fmnist --set train.steps=2 --out {}",
                  dir.path("log/tensors").string(), run.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("step_000001.npz: holds no tensors"));
  fs::remove(dir.path("log/tensors/step_000001.npz"));
  result = testing::run_command(parity(
      fmt::format("import tensors {} --case mlp2-fmnist --set train.steps=2 --out {}",
                  dir.path("log/tensors").string(), run.string())));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("holds no step_NNNNNN.safetensors or step_NNNNNN.npz"));
  EXPECT_TRUE(read_run_dir(run).tensor_steps.empty());
}

}  // namespace
}  // namespace parity::interop
