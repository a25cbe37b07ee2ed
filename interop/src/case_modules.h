// A layers model's modules as infer_model_shapes names them ("Conv_0", "Residual_2/Conv_2"),
// grouped by parity's module kinds ("conv", "batchnorm", ...) in Flax's creation order: what a
// file in another framework's names is mapped onto, k-th module of a kind to k-th. An attention
// ("Residual_0/MultiHeadDotProductAttention_0", its query/key/value/out submodules with it) and
// an MLP block ("Residual_1/MlpBlock_0", its Dense_0 and Dense_1) are one module each; the
// class token, a parameter of the model itself ("cls"), is the module "".
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "parity/common/host_tensor.h"
#include "parity/common/model_layers.h"

namespace parity::interop {

struct CaseModules {
  std::set<std::string> paths;                              // every module, as grouped above
  std::map<std::string, std::vector<std::string>> by_kind;  // kind -> paths, creation order
  std::map<std::string, Shape> shapes;                      // parameter name -> its shape
  bool has_kind(const std::string& kind) const { return by_kind.count(kind) != 0; }
  // The case's parameter of that name, nullptr if none.
  const Shape* shape_of(const std::string& name) const {
    const auto found = shapes.find(name);
    return found == shapes.end() ? nullptr : &found->second;
  }
};

CaseModules case_modules_of(const ModelShapes& shapes);

}  // namespace parity::interop
