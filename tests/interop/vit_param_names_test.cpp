// vit-fmnist's Transformer in PyTorch's and Flax's names mapped onto the case's Flax paths
// (interop/param_names.h): nn.MultiheadAttention's packed in_proj_weight onto
// MultiHeadDotProductAttention's query/key/value kernels (E, H, E/H), out_proj onto the out
// kernel (H, E/H, E), the MLP's two Linear layers onto MlpBlock_i/Dense_0 and Dense_1, the class
// token and position embeddings, the norms in creation order.
//
// The fixtures (tests/data/weights) come from scripts/gen_vit_checkpoints.py with Debian's
// python3-torch 1.13: vit_torch.safetensors is a real torch state_dict of vit-fmnist's model
// with torchvision's VisionTransformer module tree (written out in the script: torchvision is
// not installed) and seeded normal values in every parameter; vit_flax.safetensors holds the same
// values under the case's Flax paths, converted by hand in the script and checked there by
// running Flax's attention formulas on them against the torch model's output (to 1e-15).
// vit_cls_*.safetensors are the same for a variant with torchvision's class token and its
// legacy MLP names (mlp.linear_1/2), whose layers the files' metadata carry ("case_overrides").
// So a zero diff between a mapped torch file and the Flax file puts every value where Flax
// computes with it.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>

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
const fs::path kVitTorch = kWeightsDir / "vit_torch.safetensors";
const fs::path kVitFlax = kWeightsDir / "vit_flax.safetensors";
const fs::path kVitClsTorch = kWeightsDir / "vit_cls_torch.safetensors";
const fs::path kVitClsFlax = kWeightsDir / "vit_cls_flax.safetensors";

// The class-token variant's override ("model.layers=[...]"), as the script wrote it.
std::string class_token_override() {
  return read_safetensors(kVitClsTorch).metadata.at("case_overrides");
}

ModelShapes shapes_of_case(const std::string& name, const std::vector<std::string>& overrides) {
  const CaseSpec spec = load_case(name, overrides);
  return infer_model_shapes(spec.model.layers, spec.model.input);
}

std::map<std::string, Shape> param_shapes(const ModelShapes& shapes) {
  std::map<std::string, Shape> names;
  for (const ModelTensor& tensor : shapes.params) names[tensor.name] = tensor.shape;
  return names;
}

std::map<std::string, Shape> shapes_of(const NamedTensors& tensors) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, tensor] : tensors) shapes[name] = tensor.shape;
  return shapes;
}

// source -> canonical names (in_proj_weight has three).
std::multimap<std::string, std::string> canonical_of(const CanonicalParams& mapped) {
  std::multimap<std::string, std::string> names;
  for (const NameMapping& mapping : mapped.mappings)
    names.emplace(mapping.source, mapping.canonical);
  return names;
}

const NameMapping& mapping_to(const CanonicalParams& mapped, const std::string& canonical) {
  for (const NameMapping& mapping : mapped.mappings) {
    if (mapping.canonical == canonical) return mapping;
  }
  throw std::runtime_error("nothing maps onto " + canonical);
}

void expect_same_values(const NamedTensors& a, const NamedTensors& b) {
  const NameComparison names = compare_param_names(a, b);
  ASSERT_TRUE(names.all_matched()) << format_unmatched(names, "a", nullptr, "b", nullptr);
  for (const compare::TensorDelta& delta : compare::diff_tensor_sets(a, b, "a", "b", 0, 0)) {
    EXPECT_EQ(delta.max_abs, 0) << delta.name;
  }
}

// ---- attention's layout, on numbers small enough to check by hand ---------------------------

constexpr int64_t kE = 4, kH = 2, kD = 2;  // embedding, heads, head dimension

// Each element its own value: tensor[i] = offset + i.
HostTensor counting(Shape shape, float offset) {
  std::vector<float> values(shape_num_elements(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = offset + static_cast<float>(i);
  return HostTensor::from_f32(std::move(shape), values);
}

float at(const HostTensor& tensor, std::initializer_list<int64_t> index) {
  int64_t flat = 0;
  size_t axis = 0;
  for (int64_t i : index) flat = flat * tensor.shape[axis++] + i;
  return tensor.data_as<float>()[flat];
}

ModelShapes one_attention() {
  ModelShapes shapes;
  for (const char* projection : {"query", "key", "value"}) {
    shapes.params.push_back(
        {fmt::format("MultiHeadDotProductAttention_0/{}/kernel", projection), {kE, kH, kD}});
    shapes.params.push_back(
        {fmt::format("MultiHeadDotProductAttention_0/{}/bias", projection), {kH, kD}});
  }
  shapes.params.push_back({"MultiHeadDotProductAttention_0/out/kernel", {kH, kD, kE}});
  shapes.params.push_back({"MultiHeadDotProductAttention_0/out/bias", {kE}});
  return shapes;
}

// nn.MultiheadAttention(4, 2)'s state_dict, every element numbered.
NamedTensors packed_attention() {
  return {{"attn.in_proj_weight", counting({3 * kE, kE}, 0)},
          {"attn.in_proj_bias", counting({3 * kE}, 100)},
          {"attn.out_proj.weight", counting({kE, kE}, 200)},
          {"attn.out_proj.bias", counting({kE}, 300)}};
}

TEST(VitParamNames, PackedInProjectionRowsBecomeTheHeadsOfQueryKeyAndValue) {
  const ModelShapes shapes = one_attention();
  const NamedTensors torch = packed_attention();
  const CanonicalParams mapped = to_canonical_params(torch, ParamNaming::kAuto, "", &shapes);
  EXPECT_THAT(mapped.unmapped, IsEmpty());
  ASSERT_EQ(shapes_of(mapped.tensors), param_shapes(shapes));
  const HostTensor& in_proj = torch.at("attn.in_proj_weight");
  const HostTensor& out_proj = torch.at("attn.out_proj.weight");
  const std::string prefix = "MultiHeadDotProductAttention_0/";
  for (int64_t block = 0; block < 3; ++block) {
    const char* projection = std::array{"query", "key", "value"}[block];
    const HostTensor& kernel = mapped.tensors.at(prefix + projection + "/kernel");
    const HostTensor& bias = mapped.tensors.at(prefix + projection + "/bias");
    for (int64_t h = 0; h < kH; ++h) {
      for (int64_t d = 0; d < kD; ++d) {
        // Feature h * E/H + d of block `block` is head h, element d (torch's view(.., H, E/H)).
        const int64_t row = block * kE + h * kD + d;
        for (int64_t e = 0; e < kE; ++e) {
          EXPECT_EQ(at(kernel, {e, h, d}), at(in_proj, {row, e})) << projection;
        }
        EXPECT_EQ(at(bias, {h, d}), at(torch.at("attn.in_proj_bias"), {row})) << projection;
      }
    }
  }
  const HostTensor& out_kernel = mapped.tensors.at(prefix + "out/kernel");
  for (int64_t h = 0; h < kH; ++h) {
    for (int64_t d = 0; d < kD; ++d) {
      for (int64_t e = 0; e < kE; ++e) {
        EXPECT_EQ(at(out_kernel, {h, d, e}), at(out_proj, {e, h * kD + d}));
      }
    }
  }
  EXPECT_EQ(mapping_to(mapped, prefix + "key/kernel").note,
            "[4:8] of (12, 4); transposed: torch (out, in) -> (in, out); heads split: (4, 4) -> "
            "(4, 2, 2)");
  EXPECT_EQ(mapping_to(mapped, prefix + "out/kernel").note,
            "transposed: torch (out, in) -> (in, out); heads split: (4, 4) -> (2, 2, 4)");
}

// What nn.MultiheadAttention holds when kdim or vdim differ from E: the same rows, unpacked.
TEST(VitParamNames, UnpackedProjectionsMapAsThePackedOnes) {
  const ModelShapes shapes = one_attention();
  const NamedTensors packed = packed_attention();
  NamedTensors unpacked = packed;
  unpacked.erase("attn.in_proj_weight");
  const std::vector<float> rows(packed.at("attn.in_proj_weight").data_as<float>(),
                                packed.at("attn.in_proj_weight").data_as<float>() + 3 * kE * kE);
  for (int64_t block = 0; block < 3; ++block) {
    unpacked.emplace(fmt::format("attn.{}_proj_weight", std::array{"q", "k", "v"}[block]),
                     HostTensor::from_f32({kE, kE}, {rows.begin() + block * kE * kE,
                                                     rows.begin() + (block + 1) * kE * kE}));
  }
  expect_same_values(to_canonical_params(unpacked, ParamNaming::kAuto, "", &shapes).tensors,
                     to_canonical_params(packed, ParamNaming::kAuto, "", &shapes).tensors);
}

TEST(VitParamNames, AnAttentionTensorOfAnotherShapeKeepsItsNameAndSaysWhy) {
  const ModelShapes shapes = one_attention();
  NamedTensors torch = packed_attention();
  torch["attn.in_proj_weight"] = counting({3 * kE + 1, kE}, 0);
  const CanonicalParams mapped = to_canonical_params(torch, ParamNaming::kAuto, "", &shapes);
  ASSERT_EQ(mapped.unmapped.size(), 1u);
  EXPECT_EQ(mapped.unmapped[0].note, "a (13, 4) tensor is not 3 equal blocks along axis 0");
  EXPECT_EQ(mapped.tensors.count("attn.in_proj_weight"), 1u);  // kept, to be listed as unmatched
  torch["attn.in_proj_weight"] = counting({3 * kE}, 0);
  const CanonicalParams rank_one = to_canonical_params(torch, ParamNaming::kAuto, "", &shapes);
  ASSERT_EQ(rank_one.unmapped.size(), 1u);
  EXPECT_EQ(rank_one.unmapped[0].note,
            "a (12,) tensor has the wrong rank for a 'in_proj_weight' leaf");
}

// Without a case there is no head count: both frameworks' attention tensors keep their heads
// merged, (in, E), (E), (E, E), and still pair.
TEST(VitParamNames, WithoutACaseAttentionMapsWithItsHeadsMerged) {
  const CanonicalParams torch =
      to_canonical_params(read_tensor_file(kVitTorch), ParamNaming::kAuto, "vit_torch");
  const CanonicalParams flax =
      to_canonical_params(read_tensor_file(kVitFlax), ParamNaming::kAuto, "vit_flax");
  NamedTensors torch_attention, flax_attention;
  for (const char* name :
       {"attention0.query.kernel", "attention0.query.bias", "attention1.value.kernel",
        "attention1.out.kernel", "attention1.out.bias"}) {
    ASSERT_EQ(torch.tensors.count(name), 1u) << name;
    ASSERT_EQ(flax.tensors.count(name), 1u) << name;
    torch_attention.emplace(name, torch.tensors.at(name));
    flax_attention.emplace(name, flax.tensors.at(name));
  }
  expect_same_values(torch_attention, flax_attention);
  EXPECT_EQ(torch.tensors.at("attention0.query.kernel").shape, (Shape{64, 64}));
  EXPECT_EQ(torch.tensors.at("attention0.out.kernel").shape, (Shape{64, 64}));
  EXPECT_THAT(mapping_to(flax, "attention0.query.kernel").note,
              HasSubstr("heads merged: (64, 4, 16) -> (64, 64) (no case gives their count)"));
  EXPECT_THAT(mapping_to(torch, "attention0.query.kernel").note,
              HasSubstr("heads left merged: no case gives their count"));
  EXPECT_EQ(mapping_to(torch, "posembed0.pos_embedding").source, "encoder.pos_embedding");
}

// ---- the fixtures against vit-fmnist --------------------------------------------------------

TEST(VitParamNames, ATorchvisionStyleVitStateDictMapsOntoTheCasesFlaxPaths) {
  const ModelShapes shapes = shapes_of_case("vit-fmnist", {});
  const CanonicalParams torch =
      to_canonical_params(read_tensor_file(kVitTorch), ParamNaming::kAuto, "vit_torch", &shapes);
  EXPECT_EQ(torch.naming, ParamNaming::kTorch);
  EXPECT_THAT(torch.unmapped, IsEmpty());
  EXPECT_EQ(shapes_of(torch.tensors), param_shapes(shapes));

  const auto names = canonical_of(torch);
  const auto only = [&](const std::string& source) {
    EXPECT_EQ(names.count(source), 1u) << source;
    return names.find(source)->second;
  };
  EXPECT_EQ(only("conv_proj.weight"), "Conv_0/kernel");
  EXPECT_EQ(only("encoder.pos_embedding"), "AddPositionEmbs_0/pos_embedding");
  // Per encoder layer ln_1 < ln_2, and encoder.layers < encoder.ln: creation order.
  EXPECT_EQ(only("encoder.layers.encoder_layer_0.ln_1.weight"), "Residual_0/LayerNorm_0/scale");
  EXPECT_EQ(only("encoder.layers.encoder_layer_0.ln_2.weight"), "Residual_1/LayerNorm_0/scale");
  EXPECT_EQ(only("encoder.layers.encoder_layer_1.ln_1.bias"), "Residual_2/LayerNorm_0/bias");
  EXPECT_EQ(only("encoder.ln.weight"), "LayerNorm_0/scale");
  EXPECT_EQ(only("encoder.layers.encoder_layer_1.self_attention.out_proj.weight"),
            "Residual_2/MultiHeadDotProductAttention_0/out/kernel");
  EXPECT_EQ(only("encoder.layers.encoder_layer_0.mlp.0.weight"),
            "Residual_1/MlpBlock_0/Dense_0/kernel");
  EXPECT_EQ(only("encoder.layers.encoder_layer_1.mlp.3.bias"),
            "Residual_3/MlpBlock_0/Dense_1/bias");
  EXPECT_EQ(only("heads.head.weight"), "Dense_0/kernel");
  const auto in_proj =
      names.equal_range("encoder.layers.encoder_layer_1.self_attention.in_proj_weight");
  std::vector<std::string> targets;
  for (auto it = in_proj.first; it != in_proj.second; ++it) targets.push_back(it->second);
  EXPECT_THAT(targets,
              ::testing::ElementsAre("Residual_2/MultiHeadDotProductAttention_0/query/kernel",
                                     "Residual_2/MultiHeadDotProductAttention_0/key/kernel",
                                     "Residual_2/MultiHeadDotProductAttention_0/value/kernel"));
}

TEST(VitParamNames, AFlaxVariablesFileMapsByIdentityOntoTheTorchFilesValues) {
  const ModelShapes shapes = shapes_of_case("vit-fmnist", {});
  const CanonicalParams flax =
      to_canonical_params(read_tensor_file(kVitFlax), ParamNaming::kAuto, "vit_flax", &shapes);
  EXPECT_EQ(flax.naming, ParamNaming::kFlax);
  EXPECT_THAT(flax.unmapped, IsEmpty());
  for (const NameMapping& mapping : flax.mappings) {
    EXPECT_EQ(mapping.source, "params/" + mapping.canonical);
    EXPECT_EQ(mapping.note, "") << mapping.source;
  }
  expect_same_values(
      to_canonical_params(read_tensor_file(kVitTorch), ParamNaming::kAuto, "vit_torch", &shapes)
          .tensors,
      flax.tensors);
}

// The torch file under other names a PyTorch user gives the same modules: "classifier" for the
// head sorts before "encoder", and nn.TransformerEncoderLayer's self_attn, norm1, norm2, linear1
// and linear2 sit side by side in the layer. The MLP blocks still take the MLP's Linear layers
// (a module's two dense children E -> hidden -> E), the head the remaining dense layer.
TEST(VitParamNames, MlpLayersLandInTheMlpBlocksWhereverTheHeadSorts) {
  const ModelShapes shapes = shapes_of_case("vit-fmnist", {});
  const std::vector<std::pair<std::string, std::string>> renames = {
      {"heads.head.", "classifier."},
      {".self_attention.", ".self_attn."},
      {".ln_1.", ".norm1."},
      {".ln_2.", ".norm2."},
      {".mlp.0.", ".linear1."},
      {".mlp.3.", ".linear2."},
      {"encoder.layers.encoder_layer_", "encoder.layers."}};
  NamedTensors renamed;
  for (const auto& [torchvision_name, tensor] : read_tensor_file(kVitTorch)) {
    std::string name = torchvision_name;
    for (const auto& [from, to] : renames) {
      if (const size_t found = name.find(from); found != std::string::npos) {
        name.replace(found, from.size(), to);
      }
    }
    renamed.emplace(name, tensor);
  }
  ASSERT_EQ(renamed.count("encoder.layers.1.linear2.weight"), 1u);
  const CanonicalParams torch = to_canonical_params(renamed, ParamNaming::kAuto, "", &shapes);
  EXPECT_EQ(mapping_to(torch, "Dense_0/kernel").source, "classifier.weight");
  EXPECT_EQ(mapping_to(torch, "Residual_3/MlpBlock_0/Dense_1/kernel").source,
            "encoder.layers.1.linear2.weight");
  expect_same_values(torch.tensors, to_canonical_params(read_tensor_file(kVitFlax),
                                                        ParamNaming::kAuto, "vit_flax", &shapes)
                                        .tensors);
}

TEST(VitParamNames, TorchvisionsClassTokenAndLegacyMlpNamesMapOntoTheVariantsPaths) {
  const ModelShapes shapes = shapes_of_case("vit-fmnist", {class_token_override()});
  const CanonicalParams torch = to_canonical_params(read_tensor_file(kVitClsTorch),
                                                    ParamNaming::kAuto, "vit_cls_torch", &shapes);
  EXPECT_THAT(torch.unmapped, IsEmpty());
  EXPECT_EQ(mapping_to(torch, "cls").source, "class_token");
  EXPECT_EQ(mapping_to(torch, "Residual_1/MlpBlock_0/Dense_0/kernel").source,
            "encoder.layers.encoder_layer_0.mlp.linear_1.weight");
  EXPECT_EQ(torch.tensors.at("AddPositionEmbs_0/pos_embedding").shape, (Shape{1, 17, 16}));
  EXPECT_EQ(torch.tensors.at("Residual_0/MultiHeadDotProductAttention_0/query/kernel").shape,
            (Shape{16, 2, 8}));
  expect_same_values(torch.tensors, to_canonical_params(read_tensor_file(kVitClsFlax),
                                                        ParamNaming::kAuto, "vit_cls_flax", &shapes)
                                        .tensors);
}

// ---- through the parity CLI --------------------------------------------------------------------

std::string parity(const std::string& arguments) {
  return std::string(PARITY_EXECUTABLE) + " " + arguments;
}

testing::CommandResult run_parity(const std::string& arguments) {
  testing::CommandResult result = testing::run_command(parity(arguments), 120);
  EXPECT_EQ(result.exit_code, 0) << arguments << "\n" << result.output;
  return result;
}

TEST(VitTensorsDiff, TorchAndFlaxCheckpointsOfVitFmnistMatchOnTheCasesNames) {
  const auto result = run_parity(
      fmt::format("tensors diff {} {} --case vit-fmnist", kVitTorch.string(), kVitFlax.string()));
  EXPECT_THAT(result.output,
              HasSubstr("parity tensors diff of params: 39 names matched, 0 unmatched, 0 of 39 "
                        "compared tensors outside rtol 0 atol 0: same"));
  EXPECT_THAT(result.output,
              HasSubstr("Residual_0/MultiHeadDotProductAttention_0/value/kernel <- "
                        "encoder.layers.encoder_layer_0.self_attention.in_proj_weight ([128:192] "
                        "of (192, 64); transposed: torch (out, in) -> (in, out); heads split: "
                        "(64, 64) -> (64, 4, 16))"));
  EXPECT_THAT(result.output, HasSubstr("Residual_3/MlpBlock_0/Dense_1/kernel <- "
                                       "encoder.layers.encoder_layer_1.mlp.3.weight (transposed"));
}

TEST(VitTensorsDiff, TheClassTokenVariantMatchesWithTheOverrideItsFilesCarry) {
  const auto result =
      run_parity(fmt::format("tensors diff {} {} --case vit-fmnist --set {}", kVitClsTorch.string(),
                             kVitClsFlax.string(), testing::shell_quote(class_token_override())));
  EXPECT_THAT(result.output,
              HasSubstr("parity tensors diff of params: 24 names matched, 0 unmatched, 0 of 24 "
                        "compared tensors outside rtol 0 atol 0: same"));
  EXPECT_THAT(result.output, HasSubstr("cls <- class_token\n"));
}

// A run directory of the case made by `parity import metrics`, ready for `import tensors`.
std::string metrics_run(const testing::TempDir& dir, const std::string& name,
                        const std::string& case_name) {
  const fs::path run = dir.path(name);
  std::ofstream(dir.path("log.jsonl")) << "{\"step\": 0, \"loss\": 2.3}\n";
  run_parity(fmt::format("import metrics {} --case {} --set train.steps=1 --map loss=loss --out {}",
                         dir.path("log.jsonl").string(), case_name, run.string()));
  return run.string();
}

struct Checkpoints {
  const char* case_name;
  fs::path torch, flax;
  size_t num_tensors;  // parameters and BatchNorm statistics
};

// The case's name in test listings (ctest's names) rather than the struct's bytes.
void PrintTo(const Checkpoints& files, std::ostream* out) { *out << files.case_name; }

class ImportBothLayouts : public ::testing::TestWithParam<Checkpoints> {};

// Each layout imported as a run's step 0 (the case's params and batch_stats), then diffed against
// the other layout's file: the values landed in the canonical tensors the other names.
TEST_P(ImportBothLayouts, EachLayoutImportsOntoTheValuesOfTheOther) {
  const Checkpoints& files = GetParam();
  testing::TempDir dir;
  for (const auto& [imported, other] :
       {std::pair{files.torch, files.flax}, std::pair{files.flax, files.torch}}) {
    SCOPED_TRACE(imported.filename().string());
    const std::string run = metrics_run(dir, imported.stem().string(), files.case_name);
    const auto import = run_parity(
        fmt::format("import tensors {} --kind params --step 0 --case {} --set train.steps=1 "
                    "--out {}",
                    imported.string(), files.case_name, run));
    EXPECT_THAT(import.output, HasSubstr(fmt::format("{} tensors at steps 0 of case {}",
                                                     files.num_tensors, files.case_name)));
    const auto diff =
        run_parity(fmt::format("tensors diff {}/tensors/step_000000.safetensors {} "
                               "--case {}",
                               run, other.string(), files.case_name));
    EXPECT_THAT(diff.output, HasSubstr(fmt::format(
                                 "{} names matched, 0 unmatched, 0 of {} compared tensors outside "
                                 "rtol 0 atol 0: same",
                                 files.num_tensors, files.num_tensors)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    , ImportBothLayouts,
    ::testing::Values(
        // 32 parameters and 20 BatchNorm statistics (scripts/gen_resnet_weights.py).
        Checkpoints{"cnn-fmnist", kWeightsDir / "resnet_torch.safetensors",
                    kWeightsDir / "resnet_flax.safetensors", 52},
        Checkpoints{"vit-fmnist", kVitTorch, kVitFlax, 39}),
    [](const ::testing::TestParamInfo<Checkpoints>& test) {
      return test.param.case_name == std::string("cnn-fmnist") ? "CnnFmnist" : "VitFmnist";
    });

}  // namespace
}  // namespace parity::interop
