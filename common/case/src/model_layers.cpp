#include "parity/common/model_layers.h"

#include <fmt/format.h>

#include <map>
#include <numeric>

#include "parity/common/error.h"
#include "parity/common/layer_search.h"

namespace parity {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// One sample's values in `shape`, as a double: the sizes' product can leave int64.
double elements(const std::vector<int64_t>& shape) {
  double product = 1;
  for (int64_t size : shape) product *= static_cast<double>(size);
  return product;
}

// One spatial output size of a window (conv or pool) as lax.padtype_to_pads and
// lax.conv_general_dilated compute it: SAME keeps ceil(in / stride); VALID and explicit
// padding floor((in + low + high - window) / stride) + 1.
int64_t window_output(const LayerSpec& layer, size_t axis, int64_t in) {
  const int64_t window = layer.kernel[axis];
  const int64_t stride = layer.strides.empty() ? 1 : layer.strides[axis];
  if (layer.padding.mode == "SAME") return (in + stride - 1) / stride;
  const int64_t padded = layer.padding.mode == "VALID"
                             ? in
                             : in + layer.padding.pairs[axis][0] + layer.padding.pairs[axis][1];
  if (padded < window) {
    refuse_layer(
        layer,
        fmt::format("its {}x{} window does not fit an input of {} along axis {} (padded: {})",
                    layer.kernel[0], layer.kernel[1], in, axis, padded),
        "use a smaller window, padding = \"SAME\", or fewer strided layers before it");
  }
  return (padded - window) / stride + 1;
}

void require_tokens(const LayerSpec& layer, const std::vector<int64_t>& input) {
  if (input.size() != 2) {
    refuse_layer(layer,
                 fmt::format("it takes a sequence of tokens (tokens, features), found {}",
                             shape_text(input)),
                 "put a patch_embed layer before it");
  }
}

// Flax's BatchNorm on tokens (batch, tokens, features) normalises each feature over the batch
// and the tokens; torch's BatchNorm1d takes (N, C, L) and would read the tokens as its
// channels, so ddp_ref cannot build the same layer.
void require_no_tokens(const LayerSpec& layer, const std::vector<int64_t>& input) {
  if (input.size() == 2) {
    refuse_layer(layer,
                 fmt::format("it takes an image or a vector per sample, found tokens {} (torch's "
                             "BatchNorm1d takes (batch, channels, length) and would read the "
                             "tokens as channels, where Flax's BatchNorm normalises each "
                             "feature over the batch and the tokens)",
                             shape_text(input)),
                 "use layer_norm on tokens (as ViT does), or batch_norm before patch_embed");
  }
}

// The divisors of `size`, for the message that asks for a patch that divides the image.
std::string divisors(int64_t size) {
  std::vector<int64_t> found;
  for (int64_t d = 1; d <= size; ++d) {
    if (size % d == 0) found.push_back(d);
  }
  return fmt::format("{}", fmt::join(found, ", "));
}

void require_image(const LayerSpec& layer, const std::vector<int64_t>& input) {
  if (input.size() != 3) {
    refuse_layer(
        layer,
        fmt::format("it takes an image (height, width, channels), found {}", shape_text(input)),
        "give [model] input = [height, width, channels] (for fashion-mnist [28, 28, 1])");
  }
}

// Walks a layer list, naming submodules as a flax.linen compact module does.
class ShapeWalker {
 public:
  explicit ShapeWalker(ModelShapes& out) : out_(out) {}

  std::vector<int64_t> walk(const std::vector<LayerSpec>& layers, std::vector<int64_t> shape,
                            const std::string& scope, ModuleNamer& namer) {
    for (const LayerSpec& layer : layers) {
      const size_t first_param = out_.params.size();
      LayerShape record{&layer, shape, {}, 0};
      shape = apply(layer, shape, scope, namer);
      if (elements(shape) > kMaxSampleElements) {
        refuse_layer(layer,
                     fmt::format("it gives one sample {} ({:.3g} values), more than the 2^48 any "
                                 "machine holds",
                                 shape_text(shape), elements(shape)),
                     "use fewer features, a smaller window or less padding");
      }
      // A residual's parameters are its layers', which have their own records.
      if (layer.kind != "residual") {
        for (size_t i = first_param; i < out_.params.size(); ++i) {
          record.parameters += elements(out_.params[i].shape);
        }
      }
      record.output = shape;
      out_.layers.push_back(std::move(record));
    }
    return shape;
  }

 private:
  std::vector<int64_t> apply(const LayerSpec& layer, std::vector<int64_t> shape,
                             const std::string& scope, ModuleNamer& namer) {
    const std::string& kind = layer.kind;
    const std::string name = scope + namer.next(kind);
    if (kind == "dense") {
      add_params(name, layer.use_bias, {shape.back(), layer.features}, layer.features);
      shape.back() = layer.features;
    } else if (kind == "conv") {
      require_image(layer, shape);
      add_params(name, layer.use_bias, {layer.kernel[0], layer.kernel[1], shape[2], layer.features},
                 layer.features);
      shape = {window_output(layer, 0, shape[0]), window_output(layer, 1, shape[1]),
               layer.features};
    } else if (kind == "max_pool" || kind == "avg_pool") {
      require_image(layer, shape);
      shape = {window_output(layer, 0, shape[0]), window_output(layer, 1, shape[1]), shape[2]};
    } else if (kind == "global_avg_pool") {
      require_image(layer, shape);
      shape = {shape[2]};
    } else if (kind == "flatten") {
      // At most kMaxSampleElements (walk checked the input): no overflow.
      shape = {std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>())};
    } else if (kind == "batch_norm") {
      require_no_tokens(layer, shape);
      out_.params.push_back({name + "/scale", {shape.back()}});
      out_.params.push_back({name + "/bias", {shape.back()}});
      out_.batch_stats.push_back({name + "/mean", {shape.back()}});
      out_.batch_stats.push_back({name + "/var", {shape.back()}});
    } else if (kind == "layer_norm") {
      out_.params.push_back({name + "/scale", {shape.back()}});
      out_.params.push_back({name + "/bias", {shape.back()}});
    } else if (kind == "residual") {
      shape = residual(layer, shape, name + "/");
    } else if (kind == "patch_embed") {
      shape = patch_embed(layer, shape, name);
    } else if (kind == "class_token") {
      // A parameter of the model itself, not a submodule, as google-research/vision_transformer's
      // VisionTransformer creates `cls`; prepended to the tokens.
      require_tokens(layer, shape);
      if (class_token_ != nullptr) {
        // Both would be the parameter `cls` (of the model, or of a residual), which Flax
        // shares and torch would not; one class token is what ViT prepends.
        refuse_layer(layer,
                     fmt::format("a second class_token (the first is {} at {}); the model has one "
                                 "`cls` parameter",
                                 class_token_->place, class_token_->origin),
                     "keep one class_token");
      }
      class_token_ = &layer;
      out_.params.push_back({scope + "cls", {1, 1, shape[1]}});
      shape[0] += 1;
    } else if (kind == "pos_embed") {
      require_tokens(layer, shape);
      out_.params.push_back({name + "/pos_embedding", {1, shape[0], shape[1]}});
    } else if (kind == "attention") {
      attention(layer, shape, name);
    } else if (kind == "mlp_block") {
      require_tokens(layer, shape);
      const int64_t width = shape.back();
      add_params(name + "/Dense_0", true, {width, layer.features}, layer.features);
      add_params(name + "/Dense_1", true, {layer.features, width}, width);
    } else if (kind == "mean_tokens" || kind == "take_class_token") {
      require_tokens(layer, shape);
      shape = {shape[1]};
    }
    // relu, tanh, silu, gelu: functions, shape unchanged.
    return shape;
  }

  // nn.Conv(features, kernel_size=patch, strides=patch, padding="VALID"), then the (h, w) grid
  // of patches as h * w tokens.
  std::vector<int64_t> patch_embed(const LayerSpec& layer, const std::vector<int64_t>& shape,
                                   const std::string& name) {
    require_image(layer, shape);
    for (size_t axis = 0; axis < 2; ++axis) {
      if (shape[axis] % layer.kernel[axis] != 0) {
        refuse_layer(layer,
                     fmt::format("a patch of {} does not divide the image's {} along axis {}",
                                 layer.kernel[axis], shape[axis], axis),
                     fmt::format("use a patch size that divides {}: {}", shape[axis],
                                 divisors(shape[axis])));
      }
    }
    add_params(name, layer.use_bias, {layer.kernel[0], layer.kernel[1], shape[2], layer.features},
               layer.features);
    return {(shape[0] / layer.kernel[0]) * (shape[1] / layer.kernel[1]), layer.features};
  }

  // nn.MultiHeadDotProductAttention(num_heads=heads) as self-attention: DenseGeneral submodules
  // query, key and value (kernel (E, H, E/H), bias (H, E/H)) and out (kernel (H, E/H, E), bias
  // (E)), created in that order (flax/linen/attention.py, MultiHeadDotProductAttention.__call__).
  void attention(const LayerSpec& layer, const std::vector<int64_t>& shape,
                 const std::string& name) {
    require_tokens(layer, shape);
    const int64_t width = shape[1];
    if (width % layer.heads != 0) {
      refuse_layer(
          layer, fmt::format("{} heads do not divide the {} features", layer.heads, width),
          fmt::format("use a number of heads that divides {}: {}", width, divisors(width)));
    }
    const int64_t head_dim = width / layer.heads;
    for (const char* projection : {"query", "key", "value"}) {
      out_.params.push_back({fmt::format("{}/{}/kernel", name, projection),
                             {width, layer.heads, head_dim}});
      out_.params.push_back({fmt::format("{}/{}/bias", name, projection), {layer.heads, head_dim}});
    }
    out_.params.push_back({name + "/out/kernel", {layer.heads, head_dim, width}});
    out_.params.push_back({name + "/out/bias", {width}});
  }

  std::vector<int64_t> residual(const LayerSpec& layer, const std::vector<int64_t>& input,
                                const std::string& scope) {
    ModuleNamer namer;
    const std::vector<int64_t> branch = walk(layer.layers, input, scope, namer);
    const std::vector<int64_t> shortcut =
        layer.projection.empty() ? input : walk(layer.projection, input, scope, namer);
    if (branch != shortcut) {
      refuse_layer(layer,
                   fmt::format("its branch gives {} but its shortcut {}, and the two are added",
                               shape_text(branch), shape_text(shortcut)),
                   layer.projection.empty()
                       ? "add a projection (for example a 1x1 conv with the branch's features and "
                         "strides) or keep the branch's shape"
                       : "make the projection give the branch's shape");
    }
    return branch;
  }

  void add_params(const std::string& name, bool use_bias, std::vector<int64_t> kernel,
                  int64_t features) {
    out_.params.push_back({name + "/kernel", std::move(kernel)});
    if (use_bias) out_.params.push_back({name + "/bias", {features}});
  }

  ModelShapes& out_;
  const LayerSpec* class_token_ = nullptr;
};

}  // namespace

bool LayerSpec::operator==(const LayerSpec& other) const {
  return kind == other.kind && features == other.features && heads == other.heads &&
         kernel == other.kernel && strides == other.strides && padding == other.padding &&
         use_bias == other.use_bias && count_include_pad == other.count_include_pad &&
         approximate == other.approximate && rate == other.rate && momentum == other.momentum &&
         epsilon == other.epsilon && sync == other.sync &&
         use_fast_variance == other.use_fast_variance && layers == other.layers &&
         projection == other.projection;
}

const std::vector<LayerKind>& layer_kinds() {
  static const std::vector<LayerKind> kinds = {
      {"dense", {"features"}, {"use_bias"}},
      {"conv", {"features", "kernel", "padding"}, {"strides", "use_bias"}},
      // Pool strides are required: flax's pools default to 1, torch's to the window.
      {"max_pool", {"window", "strides"}, {"padding"}},
      {"avg_pool", {"window", "strides"}, {"padding", "count_include_pad"}},
      {"global_avg_pool", {}, {}},
      {"flatten", {}, {}},
      {"relu", {}, {}},
      {"tanh", {}, {}},
      {"silu", {}, {}},
      // The defaults differ (jax.nn.gelu: tanh form; torch: erf), so the case says which.
      {"gelu", {"approximate"}, {}},
      {"dropout", {"rate"}, {}},
      // Momentum and epsilon are required: flax and torch default and read them differently.
      // use_fast_variance is optional: torch has one form, so only the engine reads it.
      {"batch_norm", {"momentum", "epsilon"}, {"sync", "use_fast_variance"}},
      {"layer_norm", {"epsilon"}, {"use_fast_variance"}},
      {"residual", {"layers"}, {"projection"}},
      // Transformer kinds, on tokens (tokens, features).
      {"patch_embed", {"patch", "features"}, {"use_bias"}},
      {"class_token", {}, {}},
      {"pos_embed", {}, {}},
      {"attention", {"heads"}, {"rate"}},
      {"mlp_block", {"hidden", "approximate"}, {}},
      {"mean_tokens", {}, {}},
      {"take_class_token", {}, {}},
  };
  return kinds;
}

std::string ModuleNamer::next(const std::string& kind) {
  static const std::map<std::string, std::string> module_classes = {
      {"dense", "Dense"},         {"conv", "Conv"},           {"batch_norm", "BatchNorm"},
      {"layer_norm", "LayerNorm"}, {"residual", "Residual"}, {"dropout", "Dropout"},
      // A patch embedding is an nn.Conv; the others are the modules google-research's ViT
      // defines (AddPositionEmbs, MlpBlock) and Flax's attention.
      {"patch_embed", "Conv"},    {"pos_embed", "AddPositionEmbs"},
      {"attention", "MultiHeadDotProductAttention"}, {"mlp_block", "MlpBlock"}};
  const auto found = module_classes.find(kind);
  if (found == module_classes.end()) return "";
  return fmt::format("{}_{}", found->second, counters_[found->second]++);
}

std::vector<std::string> split_module_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', start)) {
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  parts.push_back(path.substr(start));
  return parts;
}

std::string join_module_path(const std::vector<std::string>& path) {
  std::string joined;
  for (const std::string& name : path) joined += (joined.empty() ? "" : "/") + name;
  return joined;
}

const LayerKind* find_layer_kind(const std::string& name) {
  for (const LayerKind& kind : layer_kinds()) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

const LayerSpec* find_layer(const std::vector<LayerSpec>& layers,
                            const std::function<bool(const LayerSpec&)>& matches) {
  for (const LayerSpec& layer : layers) {
    if (matches(layer)) return &layer;
    for (const auto* nested : {&layer.layers, &layer.projection}) {
      if (const LayerSpec* found = find_layer(*nested, matches)) return found;
    }
  }
  return nullptr;
}

void refuse_layer(const LayerSpec& layer, const std::string& problem, const std::string& fix) {
  throw InputError(fmt::format("{}: {} at {}: {}; {}",
                               layer.place.empty() ? "model.layers" : layer.place, layer.kind,
                               layer.origin, problem, fix));
}

ModelShapes infer_model_shapes(const std::vector<LayerSpec>& layers,
                               const std::vector<int64_t>& input) {
  if (elements(input) > kMaxSampleElements) {
    throw InputError(fmt::format(
        "model.input: {} is {:.3g} values per sample, more than the 2^48 any machine holds; "
        "give one sample's shape (for fashion-mnist [28, 28, 1])",
        shape_text(input), elements(input)));
  }
  ModelShapes shapes;
  ModuleNamer namer;
  shapes.output = ShapeWalker(shapes).walk(layers, input, "", namer);
  return shapes;
}

}  // namespace parity
