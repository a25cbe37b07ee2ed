#include "parity/common/layer_intermediates.h"

#include <fmt/format.h>

#include "parity/common/layer_search.h"

namespace parity {
namespace {

constexpr const char* kResidualSum = "sum";
constexpr const char* kProjection = "projection";

// Decimal digits of n (1 for 0).
size_t digits(size_t n) {
  size_t count = 1;
  while (n >= 10) {
    n /= 10;
    ++count;
  }
  return count;
}

std::array<int64_t, 2> window_strides(const LayerSpec& layer) {
  if (layer.kind != "conv" && layer.kind != "max_pool" && layer.kind != "avg_pool") return {1, 1};
  if (layer.strides.empty()) return {1, 1};  // a conv's default; a pool's strides are required
  return {layer.strides[0], layer.strides[1]};
}

// Walks a layer list in forward order, as both producers apply it, naming the modules as
// infer_model_shapes does.
class IntermediateWalker {
 public:
  explicit IntermediateWalker(std::vector<LayerIntermediate>& out) : out_(out) {}

  // `layers` on an input of one sample's shape `shape`, read from the intermediate `input`, their
  // modules named by `namer` within `scope` ("" or "Residual_0/"); returns the path of the list's
  // output and leaves its shape in `shape`.
  std::string walk(const std::vector<LayerSpec>& layers, std::vector<int64_t>& shape,
                   const std::string& prefix, std::string input, const std::string& scope,
                   ModuleNamer& namer) {
    for (size_t i = 0; i < layers.size(); ++i) {
      const LayerSpec& layer = layers[i];
      const std::string path = intermediate_path(prefix, i, layers.size(), layer.kind);
      const std::string module = namer.next(layer.kind);
      if (layer.kind == "residual") {
        input = residual(layer, shape, path, input, scope + module + "/");
      } else if (layer.kind == "mlp_block") {
        ModuleNamer inner;
        input = walk(mlp_block_layers(layer, shape.back()), shape, intermediate_branch_prefix(path),
                     input, scope + module + "/", inner);
      } else {
        shape = infer_model_shapes({layer}, shape).output;
        const bool normalises = layer.kind == "batch_norm" || layer.kind == "layer_norm";
        out_.push_back({path, layer.kind, shape, {input}, window_strides(layer),
                        module.empty() ? "" : scope + module,
                        normalises && layer.use_fast_variance});
        input = path;
      }
    }
    return input;
  }

 private:
  // A residual's branch and projection share one namer within its scope, as in
  // infer_model_shapes.
  std::string residual(const LayerSpec& layer, std::vector<int64_t>& shape, const std::string& path,
                       const std::string& input, const std::string& scope) {
    ModuleNamer namer;
    std::vector<int64_t> branch_shape = shape;
    const std::string branch =
        walk(layer.layers, branch_shape, intermediate_branch_prefix(path), input, scope, namer);
    std::vector<int64_t> shortcut_shape = shape;
    const std::string shortcut = walk(layer.projection, shortcut_shape,
                                      intermediate_projection_prefix(path), input, scope, namer);
    const std::string sum = *intermediate_output_path(path, layer.kind);
    out_.push_back({sum, layer.kind, branch_shape, {branch, shortcut}, {1, 1}, "", false});
    shape = branch_shape;
    return sum;
  }

  std::vector<LayerIntermediate>& out_;
};

}  // namespace

std::string intermediate_path(const std::string& prefix, size_t index, size_t count,
                              const std::string& kind) {
  const size_t width = std::max<size_t>(2, digits(count == 0 ? 0 : count - 1));
  return fmt::format("{}{:0{}}_{}", prefix, index, width, kind);
}

std::optional<std::string> intermediate_output_path(const std::string& path,
                                                    const std::string& kind) {
  if (kind == "mlp_block") return std::nullopt;
  if (kind == "residual") return path + "/" + kResidualSum;
  return path;
}

std::string intermediate_branch_prefix(const std::string& path) { return path + "/"; }

std::string intermediate_projection_prefix(const std::string& path) {
  return path + "/" + kProjection + "/";
}

std::vector<LayerSpec> mlp_block_layers(const LayerSpec& block, int64_t width) {
  const auto sublayer = [&block](const std::string& kind, int64_t features) {
    LayerSpec spec;
    spec.kind = kind;
    spec.features = features;
    spec.approximate = block.approximate;
    spec.origin = block.origin;
    return spec;
  };
  return {sublayer("dense", block.features), sublayer("gelu", 0), sublayer("dense", width)};
}

bool records_intermediates(const ModelSpec& model) {
  if (model.layers.empty()) return false;
  return find_layer(model.layers, [](const LayerSpec& layer) {
           return layer.kind == "batch_norm" && layer.sync;
         }) == nullptr;
}

std::vector<LayerIntermediate> layer_intermediates(const ModelSpec& model) {
  std::vector<LayerIntermediate> out;
  std::vector<int64_t> shape = model.input;
  ModuleNamer namer;
  IntermediateWalker(out).walk(model.layers, shape, "", kIntermediatesInput, "", namer);
  return out;
}

}  // namespace parity
