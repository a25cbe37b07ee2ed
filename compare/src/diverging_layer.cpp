#include "diverging_layer.h"

#include <fmt/format.h>

#include "figures.h"
#include "parity/common/layer_intermediates.h"
#include "tensor_scan.h"

namespace parity::compare {

std::optional<LayerValues> layer_values(const RunPair& runs, const DivergingLayer& layer) {
  if (layer.inputs.size() != 1) return std::nullopt;
  const auto values_of = [&layer](const NamedTensors& tensors, const RunDir& run,
                                  const std::string& name) -> std::vector<double> {
    const std::string key = name == kIntermediatesInput ? name : kIntermediatesGroup + name;
    const auto found = tensors.find(key);
    if (found == tensors.end()) return {};
    return recorded_values(found->second, key, intermediates_path(run.dir, layer.step).string());
  };
  const NamedTensors a = read_step_intermediates(runs.a.dir, layer.step);
  const NamedTensors b = read_step_intermediates(runs.b.dir, layer.step);
  LayerValues values{values_of(a, runs.a, layer.inputs.front()), values_of(a, runs.a, layer.path),
                     values_of(b, runs.b, layer.path), {}};
  if (values.x.empty() || values.a.empty() || values.a.size() != values.b.size()) {
    return std::nullopt;
  }
  const std::string& input = layer.inputs.front();
  values.x_shape = a.at(input == kIntermediatesInput ? input : kIntermediatesGroup + input).shape;
  return values;
}

std::string layer_text(const DivergingLayer& layer) {
  return fmt::format("the first layer output that parts at step {} is {} (a {}), and what it "
                     "read agrees ({}, max |A - B| {})",
                     layer.step, layer.path, layer.kind, fmt::join(layer.inputs, ", "),
                     format_number(layer.input_max_abs));
}

}  // namespace parity::compare
