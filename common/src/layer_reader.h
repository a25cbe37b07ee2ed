// Reading [model] layers from the case file: each layer a table with a `kind` and that kind's
// keys (model_layers.h), checked as they are read, errors naming the layer's position.
#pragma once

#include <toml++/toml.h>

#include <functional>
#include <string>
#include <vector>

#include "case_errors.h"
#include "parity/common/model_layers.h"

namespace parity {

// `origin_of` names where a node was written (a file position, or the --set text).
std::vector<LayerSpec> read_layers(const toml::node& node, const std::string& path,
                                   const std::function<Origin(const toml::node&)>& origin_of);

}  // namespace parity
