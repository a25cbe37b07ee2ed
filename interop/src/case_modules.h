// A layers model's modules as infer_model_shapes names them ("Conv_0", "Residual_2/Conv_2"),
// grouped by parity's module kinds ("conv", "batchnorm", ...) in Flax's creation order: what a
// file in another framework's names is mapped onto, k-th module of a kind to k-th.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "parity/common/model_layers.h"

namespace parity::interop {

struct CaseModules {
  std::set<std::string> paths;                              // every module with a tensor
  std::map<std::string, std::vector<std::string>> by_kind;  // kind -> paths, creation order
  bool has_kind(const std::string& kind) const { return by_kind.count(kind) != 0; }
};

CaseModules case_modules_of(const ModelShapes& shapes);

}  // namespace parity::interop
