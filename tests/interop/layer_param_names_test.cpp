// A layers model's tensors in PyTorch's and Flax's names mapped onto the case's Flax paths
// (interop/param_names.h), compared (`parity tensors diff --case`) and imported (`parity import
// tensors`). resnet_torch.safetensors is a real torch state_dict of cnn-fmnist's ResNet with
// torchvision's module names (the model of interop/python/examples/train_cnn_ddp.py, seeded
// torch init, one training forward), and resnet_flax.safetensors the same values in Flax's
// variables layout with the names written out by hand: scripts/gen_resnet_weights.py made both
// with Debian's python3-torch 1.13.1.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/model_layers.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/compare/tensor_diff.h"
#include "parity/interop/param_names.h"
#include "parity/interop/tensor_import.h"
#include "test_files.h"

namespace parity::interop {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const fs::path kWeightsDir = PARITY_WEIGHTS_DIR;

ModelShapes cnn_fmnist_shapes() {
  const CaseSpec spec = load_case("cnn-fmnist", {});
  return infer_model_shapes(spec.model.layers, spec.model.input);
}

// name -> shape of the case's tensors: parameters, and BatchNorm statistics if asked.
std::map<std::string, Shape> case_shapes(const ModelShapes& shapes, bool with_statistics) {
  std::map<std::string, Shape> names;
  for (const ModelTensor& tensor : shapes.params) names[tensor.name] = tensor.shape;
  if (with_statistics) {
    for (const ModelTensor& tensor : shapes.batch_stats) names[tensor.name] = tensor.shape;
  }
  return names;
}

std::map<std::string, Shape> shapes_of(const NamedTensors& tensors) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, tensor] : tensors) shapes[name] = tensor.shape;
  return shapes;
}

const NameMapping& mapping_of(const CanonicalParams& mapped, const std::string& source) {
  for (const NameMapping& mapping : mapped.mappings) {
    if (mapping.source == source) return mapping;
  }
  throw std::runtime_error("no mapping of " + source);
}

TEST(LayerParamNames, ATorchvisionStyleResNetStateDictMapsOntoTheCasesFlaxPaths) {
  const ModelShapes shapes = cnn_fmnist_shapes();
  const CanonicalParams torch =
      to_canonical_params(read_tensor_file(kWeightsDir / "resnet_torch.safetensors"),
                          ParamNaming::kAuto, "resnet_torch", &shapes);
  EXPECT_EQ(torch.naming, ParamNaming::kTorch);
  EXPECT_THAT(torch.unmapped, IsEmpty());
  EXPECT_EQ(shapes_of(torch.tensors), case_shapes(shapes, true));
  EXPECT_EQ(torch.ignored.size(), 10u);  // every BatchNorm's num_batches_tracked

  EXPECT_EQ(mapping_of(torch, "conv1.weight").canonical, "Conv_0/kernel");
  EXPECT_EQ(mapping_of(torch, "layer1.0.conv2.weight").canonical, "Residual_0/Conv_1/kernel");
  EXPECT_EQ(mapping_of(torch, "layer2.0.downsample.0.weight").canonical,
            "Residual_2/Conv_2/kernel");
  EXPECT_EQ(mapping_of(torch, "layer2.0.downsample.1.weight").canonical,
            "Residual_2/BatchNorm_2/scale");
  EXPECT_EQ(mapping_of(torch, "layer2.1.bn2.running_mean").canonical,
            "Residual_3/BatchNorm_1/mean");
  EXPECT_EQ(mapping_of(torch, "fc.weight").canonical, "Dense_0/kernel");
  EXPECT_THAT(mapping_of(torch, "fc.weight").note, HasSubstr("transposed"));
  EXPECT_THAT(mapping_of(torch, "bn1.running_var").note,
              HasSubstr("torch's running variance averages the unbiased batch variance"));
  EXPECT_EQ(torch.tensors.at("Residual_2/Conv_0/kernel").shape, (Shape{3, 3, 16, 32}));  // HWIO
}

TEST(LayerParamNames, AFlaxVariablesFileMapsByIdentityOntoTheTorchFilesValues) {
  const ModelShapes shapes = cnn_fmnist_shapes();
  const CanonicalParams flax =
      to_canonical_params(read_tensor_file(kWeightsDir / "resnet_flax.safetensors"),
                          ParamNaming::kAuto, "resnet_flax", &shapes);
  const CanonicalParams torch =
      to_canonical_params(read_tensor_file(kWeightsDir / "resnet_torch.safetensors"),
                          ParamNaming::kAuto, "resnet_torch", &shapes);
  EXPECT_EQ(flax.naming, ParamNaming::kFlax);
  EXPECT_THAT(flax.unmapped, IsEmpty());
  for (const NameMapping& mapping : flax.mappings) {
    // "params/Residual_2/Conv_2/kernel" -> "Residual_2/Conv_2/kernel"
    EXPECT_EQ(mapping.source.substr(mapping.source.find('/') + 1), mapping.canonical);
  }
  const NameComparison names = compare_param_names(torch.tensors, flax.tensors);
  EXPECT_TRUE(names.all_matched()) << format_unmatched(names, "torch", &torch, "flax", &flax);
  for (const compare::TensorDelta& delta :
       compare::diff_tensor_sets(torch.tensors, flax.tensors, "torch", "flax", 0, 0)) {
    EXPECT_EQ(delta.max_abs, 0) << delta.name;
  }
}

// What parity_torch_log writes at a record step: gradients have no BatchNorm statistics (read
// as BatchNorm's because the case has no LayerNorm) and the statistics come alone.
TEST(LayerParamNames, GradientAndStatisticGroupsMapOntoTheCasesNamesAlone) {
  const ModelShapes shapes = cnn_fmnist_shapes();
  const NamedTensors state = read_tensor_file(kWeightsDir / "resnet_torch.safetensors");
  NamedTensors parameters, statistics;
  for (const auto& [name, tensor] : state) {
    const bool statistic = name.find(".running_") != std::string::npos;
    if (name.find("num_batches_tracked") == std::string::npos) {
      (statistic ? statistics : parameters).emplace(name, tensor);
    }
  }
  const CanonicalParams grads = to_canonical_params(parameters, ParamNaming::kAuto, "", &shapes);
  EXPECT_EQ(shapes_of(grads.tensors), case_shapes(shapes, false));
  const CanonicalParams stats = to_canonical_params(statistics, ParamNaming::kAuto, "", &shapes);
  EXPECT_EQ(stats.naming, ParamNaming::kTorch);
  std::set<std::string> names;
  for (const auto& [name, tensor] : stats.tensors) names.insert(name);
  std::set<std::string> expected;
  for (const ModelTensor& tensor : shapes.batch_stats) expected.insert(tensor.name);
  EXPECT_EQ(names, expected);
}

// A transition conv created after a block: Conv_1 sorts before Residual_0/Conv_0, so only the
// identity of the case's own paths, not natural order, gives Flax files their names.
TEST(LayerParamNames, FlaxPathsMapByIdentityWhereNaturalOrderIsNotCreationOrder) {
  ModelShapes shapes;
  shapes.params = {{"Conv_0/kernel", {3, 3, 1, 4}},
                   {"Residual_0/Conv_0/kernel", {3, 3, 4, 4}},
                   {"Conv_1/kernel", {3, 3, 4, 8}}};
  NamedTensors flax, torch;
  for (const ModelTensor& tensor : shapes.params) {
    flax.emplace("params/" + tensor.name, HostTensor::zeros(DType::F32, tensor.shape));
  }
  const CanonicalParams by_identity = to_canonical_params(flax, ParamNaming::kAuto, "", &shapes);
  EXPECT_EQ(shapes_of(by_identity.tensors), case_shapes(shapes, false));
  // torch's registration order is creation order, and here natural order too: 0 < 1.conv < 2.
  torch.emplace("0.weight", HostTensor::zeros(DType::F32, {4, 1, 3, 3}));
  torch.emplace("1.conv.weight", HostTensor::zeros(DType::F32, {4, 4, 3, 3}));
  torch.emplace("2.weight", HostTensor::zeros(DType::F32, {8, 4, 3, 3}));
  const CanonicalParams by_kind = to_canonical_params(torch, ParamNaming::kAuto, "", &shapes);
  EXPECT_EQ(shapes_of(by_kind.tensors), case_shapes(shapes, false));
  EXPECT_EQ(mapping_of(by_kind, "2.weight").canonical, "Conv_1/kernel");
}

TEST(LayerParamNames, AModuleTheCaseDoesNotHaveKeepsItsNameAndSaysWhy) {
  ModelShapes shapes;
  shapes.params = {{"Dense_0/kernel", {4, 2}}, {"Dense_0/bias", {2}}};
  NamedTensors torch = {{"fc.weight", HostTensor::zeros(DType::F32, {2, 4})},
                        {"fc.bias", HostTensor::zeros(DType::F32, {2})},
                        {"head.weight", HostTensor::zeros(DType::F32, {2, 2})}};
  for (const char* leaf : {"weight", "bias", "running_mean", "running_var"}) {
    torch.emplace(std::string("norm.") + leaf, HostTensor::zeros(DType::F32, {2}));
  }
  torch.emplace("norm.num_batches_tracked", HostTensor::zeros(DType::I64, {}));
  const CanonicalParams mapped = to_canonical_params(torch, ParamNaming::kAuto, "", &shapes);
  std::map<std::string, std::string> why;
  for (const NameMapping& unmapped : mapped.unmapped) why[unmapped.source] = unmapped.note;
  EXPECT_EQ(why.size(), 5u);
  EXPECT_THAT(why["head.weight"],
              HasSubstr("'head' is dense module 1 of the file (from 0, in natural path order) "
                        "but the case's model has 1 dense modules"));
  EXPECT_THAT(why["norm.running_var"], HasSubstr("the case's model has 0 batchnorm modules"));
  ASSERT_EQ(mapped.ignored.size(), 1u);  // the counter is set aside, not refused as an integer
  EXPECT_EQ(mapped.ignored[0].source, "norm.num_batches_tracked");
}

std::string parity(const std::string& arguments) {
  return std::string(PARITY_EXECUTABLE) + " " + arguments;
}

TEST(TensorsDiff, TorchAndFlaxCheckpointsOfCnnFmnistMatchOnTheCasesNames) {
  const auto result = testing::run_command(parity(fmt::format(
      "tensors diff {} {} --case cnn-fmnist", (kWeightsDir / "resnet_torch.safetensors").string(),
      (kWeightsDir / "resnet_flax.safetensors").string())));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("52 names matched, 0 unmatched, 0 of 52 compared tensors outside rtol 0 "
                        "atol 0: same"));
  EXPECT_THAT(result.output,
              HasSubstr("Residual_2/Conv_2/kernel <- layer2.0.downsample.0.weight (axes moved"));
  EXPECT_THAT(result.output, HasSubstr("ignored layer2.0.downsample.1.num_batches_tracked"));
}

// A saved model against a run directory's step file as producers write it (params/, grads/,
// batch_stats/): the state_dict's running statistics are compared as its batch_stats group, not
// left over as parameters that only A holds. The step file is the state_dict imported as step
// 0's parameters and statistics, with gradients (the parameters' values) imported beside them.
TEST(TensorsDiff, ATorchStateDictPairsItsStatisticsWithARunsBatchStats) {
  testing::TempDir dir;
  const fs::path run = dir.path("run");
  const fs::path state_dict = kWeightsDir / "resnet_torch.safetensors";
  NamedTensors grads;
  for (const auto& [name, tensor] : read_tensor_file(state_dict)) {
    const bool buffer = name.find(".running_") != std::string::npos ||
                        name.find("num_batches_tracked") != std::string::npos;
    if (!buffer) grads.emplace(name, tensor);
  }
  write_safetensors(dir.path("grads.safetensors"), grads);
  std::ofstream(dir.path("log.jsonl")) << "{\"step\": 0, \"loss\": 2.3}\n";
  for (const std::string& command :
       {fmt::format("import metrics {} --case cnn-fmnist --set train.steps=1 --map loss=loss "
                    "--out {}",
                    dir.path("log.jsonl").string(), run.string()),
        fmt::format("import tensors {} --kind params --step 0 --case cnn-fmnist --set "
                    "train.steps=1 --out {}",
                    state_dict.string(), run.string()),
        fmt::format("import tensors {} --kind grads --step 0 --case cnn-fmnist --set "
                    "train.steps=1 --out {}",
                    dir.path("grads.safetensors").string(), run.string())}) {
    const auto result = testing::run_command(parity(command));
    ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.output;
  }
  const auto result = testing::run_command(
      parity(fmt::format("tensors diff {} {}/tensors/step_000000.safetensors --case cnn-fmnist",
                         state_dict.string(), run.string())));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("parity tensors diff of batch_stats and params: 52 names matched, 0 "
                        "unmatched, 0 of 52 compared tensors outside rtol 0 atol 0: same; not "
                        "compared: grads (only B holds grads)"));
  EXPECT_THAT(result.output, HasSubstr("Residual_3/BatchNorm_1/mean <- layer2.1.bn2.running_mean"));
}

TEST(TensorImport, ATorchResNetStateDictImportsAsTheRunsParamsAndBatchStats) {
  testing::TempDir dir;
  const fs::path run = dir.path("run");
  std::ofstream(dir.path("log.jsonl")) << "{\"step\": 0, \"loss\": 2.3}\n";
  auto result = testing::run_command(parity(fmt::format(
      "import metrics {} --case cnn-fmnist --set train.steps=1 --map loss=loss --out {}",
      dir.path("log.jsonl").string(), run.string())));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  result = testing::run_command(parity(fmt::format(
      "import tensors {} --kind params --step 0 --case cnn-fmnist --set train.steps=1 --out {}",
      (kWeightsDir / "resnet_torch.safetensors").string(), run.string())));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("52 tensors at steps 0 of case cnn-fmnist, read as torch"));

  const ModelShapes shapes = cnn_fmnist_shapes();
  std::map<std::string, Shape> expected;
  for (const ModelTensor& tensor : shapes.params) expected["params/" + tensor.name] = tensor.shape;
  for (const ModelTensor& tensor : shapes.batch_stats) {
    expected["batch_stats/" + tensor.name] = tensor.shape;
  }
  EXPECT_EQ(shapes_of(read_step_tensors(run, 0)), expected);
}

}  // namespace
}  // namespace parity::interop
