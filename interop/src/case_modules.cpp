#include "case_modules.h"

#include <algorithm>

namespace parity::interop {
namespace {

// flax.linen's class names (the auto-names' stem) -> the kinds param_names.cpp gives modules.
const std::map<std::string, std::string> kKindOfFlaxClass = {
    {"Dense", "dense"}, {"Conv", "conv"}, {"BatchNorm", "batchnorm"}, {"LayerNorm", "layernorm"}};

// "Residual_2/Conv_2" -> "Conv".
std::string flax_class(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
  return last.substr(0, last.rfind('_'));
}

}  // namespace

CaseModules case_modules_of(const ModelShapes& shapes) {
  CaseModules modules;
  // params lists every module with a parameter in creation order (BatchNorm's scale and bias
  // included); batch_stats adds no module of its own.
  for (const ModelTensor& tensor : shapes.params) {
    const std::string path = tensor.name.substr(0, tensor.name.rfind('/'));
    if (!modules.paths.insert(path).second) continue;
    const auto kind = kKindOfFlaxClass.find(flax_class(path));
    if (kind != kKindOfFlaxClass.end()) modules.by_kind[kind->second].push_back(path);
  }
  return modules;
}

}  // namespace parity::interop
