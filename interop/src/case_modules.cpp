#include "case_modules.h"

namespace parity::interop {
namespace {

// flax.linen's class names (the auto-names' stem; common/case/src/model_layers.cpp, ModuleNamer) ->
// the kinds param_names.cpp gives modules.
const std::map<std::string, std::string> kKindOfFlaxClass = {
    {"Dense", "dense"},
    {"Conv", "conv"},
    {"BatchNorm", "batchnorm"},
    {"LayerNorm", "layernorm"},
    {"AddPositionEmbs", "posembed"},
    {"MultiHeadDotProductAttention", "attention"},
    {"MlpBlock", "mlpblock"}};
// Classes whose submodules are mapped with them, as one module.
const std::set<std::string> kWholeModuleClasses = {"MultiHeadDotProductAttention", "MlpBlock"};
// VisionTransformer's own parameter (model_layers.cpp, class_token): the top-level module's.
constexpr const char* kClassTokenName = "cls";

// "Conv_2" -> "Conv".
std::string flax_class(const std::string& module) { return module.substr(0, module.rfind('_')); }

struct CaseModule {
  std::string path;
  std::string kind;  // "" for a module of no kind param_names.cpp maps
};

// The module a parameter ("Residual_0/MultiHeadDotProductAttention_0/query/kernel") is mapped
// with: its own, or an attention or MLP block around it.
CaseModule module_of(const std::string& name) {
  if (name == kClassTokenName) return {"", "classtoken"};
  std::string path;
  size_t begin = 0;
  for (size_t slash = name.find('/'); slash != std::string::npos;
       begin = slash + 1, slash = name.find('/', begin)) {
    const std::string part = name.substr(begin, slash - begin);
    path += (path.empty() ? "" : "/") + part;
    const std::string cls = flax_class(part);
    const bool whole = kWholeModuleClasses.count(cls) != 0;
    const bool last = name.find('/', slash + 1) == std::string::npos;
    if (whole || last) {
      const auto kind = kKindOfFlaxClass.find(cls);
      return {path, kind == kKindOfFlaxClass.end() ? "" : kind->second};
    }
  }
  return {path, ""};
}

}  // namespace

CaseModules case_modules_of(const ModelShapes& shapes) {
  CaseModules modules;
  // params lists every module with a parameter in creation order (BatchNorm's scale and bias
  // included); batch_stats adds no module of its own.
  for (const ModelTensor& tensor : shapes.params) {
    modules.shapes.emplace(tensor.name, tensor.shape);
    const CaseModule module = module_of(tensor.name);
    if (!modules.paths.insert(module.path).second) continue;
    if (!module.kind.empty()) modules.by_kind[module.kind].push_back(module.path);
  }
  return modules;
}

}  // namespace parity::interop
