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

// Names where a node was written (a file position, or the override that set it), given the
// node and its path ("model.layers[2].momentum").
using NodeOrigin = std::function<Origin(const toml::node&, const std::string& path)>;

std::vector<LayerSpec> read_layers(const toml::node& node, const std::string& path,
                                   const NodeOrigin& origin_of);

// The keys a layer kind takes, required ones first.
std::vector<std::string> layer_keys(const LayerKind& kind);

// The error for a key `kind` does not take, at the layer `path`, listing the keys it takes.
[[noreturn]] void fail_unknown_layer_key(const Origin& origin, const std::string& path,
                                         const LayerKind& kind, const std::string& name);

}  // namespace parity
