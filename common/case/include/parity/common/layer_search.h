// Searching a case's layer list (model_layers.h), residual branches and projections included.
#pragma once

#include <functional>
#include <vector>

#include "parity/common/model_layers.h"

namespace parity {

// The first layer, in the order the list is written (a residual before its branch, the branch
// before its projection), that `matches`; null if none.
const LayerSpec* find_layer(const std::vector<LayerSpec>& layers,
                            const std::function<bool(const LayerSpec&)>& matches);

}  // namespace parity
