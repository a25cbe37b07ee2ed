#include "layer_reader.h"

#include <fmt/format.h>

#include <algorithm>

namespace parity {
namespace {

// Why a key is what it is, for the error that asks for it.
std::string key_help(const std::string& key) {
  if (key == "momentum") {
    return "Flax's convention: the running average keeps momentum of its old value (flax "
           "default 0.99; torch's momentum 0.1 is Flax's 0.9)";
  }
  if (key == "epsilon")
    return "added to the variance (flax BatchNorm 1e-5, LayerNorm 1e-6; torch 1e-5)";
  if (key == "approximate") {
    return "true for the tanh form (jax.nn.gelu's default), false for erf (torch's default)";
  }
  if (key == "use_fast_variance") {
    return "true for Flax's one-pass variance E[x^2] - E[x]^2 (its default), false for "
           "E[(x - E[x])^2] (torch's form)";
  }
  if (key == "strides") return "flax's pools default to 1, torch's to the window, so say which";
  if (key == "padding") return "\"SAME\", \"VALID\" or [[top, bottom], [left, right]]";
  if (key == "patch") return "[height, width] of a patch; both must divide the image's";
  if (key == "heads") return "the number of attention heads; it must divide the features";
  if (key == "hidden") return "the width of the MLP's hidden layer";
  return "";
}

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (const LayerKind& kind : layer_kinds()) names.push_back(kind.name);
  return names;
}

std::string kinds_hint() { return "layer kinds: " + join(kind_names()); }

class LayerReader {
 public:
  explicit LayerReader(const NodeOrigin& origin_of) : origin_of_(origin_of) {}

  std::vector<LayerSpec> list(const toml::node& node, const std::string& path) {
    const toml::array* array = node.as_array();
    if (array == nullptr || array->empty()) {
      fail_at(origin_of_(node, path), path + ": expected a non-empty array of layer tables",
              "for example layers = [{ kind = \"dense\", features = 10 }]");
    }
    std::vector<LayerSpec> layers;
    for (size_t i = 0; i < array->size(); ++i) {
      layers.push_back(layer(*array->get(i), fmt::format("{}[{}]", path, i)));
    }
    return layers;
  }

 private:
  LayerSpec layer(const toml::node& node, const std::string& path) {
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      fail_at(origin_of_(node, path), path + ": expected a layer table { kind = \"...\", ... }");
    }
    const toml::node* kind_node = table->get("kind");
    if (kind_node == nullptr || !kind_node->is_string()) {
      fail_at(origin_of_(node, path), path + ": every layer needs kind = \"...\"", kinds_hint());
    }
    LayerSpec layer;
    layer.kind = kind_node->as_string()->get();
    const Origin origin = origin_of_(node, path);
    layer.origin = describe(origin);
    layer.place = path;
    const LayerKind* kind = find_layer_kind(layer.kind);
    if (kind == nullptr) {
      const std::string suggestion = did_you_mean(layer.kind, kind_names());
      fail_at(origin_of_(*kind_node, path + ".kind"),
              fmt::format("{}.kind: unknown layer kind '{}'", path, layer.kind),
              suggestion.empty() ? kinds_hint() : suggestion);
    }
    const std::vector<std::string> keys = layer_keys(*kind);
    for (auto&& [key, value] : *table) {
      const std::string name(key.str());
      if (name == "kind") continue;
      if (std::find(keys.begin(), keys.end(), name) == keys.end()) {
        fail_unknown_layer_key(origin_of_(value, path + "." + name), path, *kind, name);
      }
      read_key(layer, name, value, path + "." + name);
    }
    for (const std::string& name : kind->required) {
      if (table->get(name) == nullptr) {
        fail_at(origin, fmt::format("{}: a {} layer needs {}", path, layer.kind, name),
                key_help(name));
      }
    }
    return layer;
  }

  void read_key(LayerSpec& layer, const std::string& name, const toml::node& value,
                const std::string& path) {
    if (name == "features" || name == "hidden") layer.features = integer(value, path, 1);
    if (name == "heads") layer.heads = integer(value, path, 1);
    if (name == "kernel" || name == "window" || name == "patch") {
      layer.kernel = pair(value, path, 1);
    }
    if (name == "strides") layer.strides = pair(value, path, 1);
    if (name == "padding") layer.padding = padding(value, path);
    if (name == "use_bias") layer.use_bias = boolean(value, path);
    if (name == "count_include_pad") layer.count_include_pad = boolean(value, path);
    if (name == "approximate") layer.approximate = boolean(value, path);
    if (name == "sync") layer.sync = boolean(value, path);
    if (name == "use_fast_variance") layer.use_fast_variance = boolean(value, path, key_help(name));
    if (name == "rate") layer.rate = number(value, path, 0, 1, "in [0, 1)", true);
    if (name == "momentum") layer.momentum = number(value, path, 0, 1, "in [0, 1]", false);
    if (name == "epsilon") layer.epsilon = number(value, path, 0, 1, "in (0, 1]", false, true);
    if (name == "layers") layer.layers = list(value, path);
    if (name == "projection") layer.projection = list(value, path);
  }

  // A size: at least `min`, at most kMaxLayerSize (what a layer may really ask for is the
  // memory estimate's business, case_limits.h).
  int64_t integer(const toml::node& value, const std::string& path, int64_t min) {
    const std::optional<int64_t> number = value.value_exact<int64_t>();
    if (!number || *number < min || *number > kMaxLayerSize) {
      fail_at(origin_of_(value, path),
              fmt::format("{}: expected an integer in [{}, {}]", path, min, kMaxLayerSize));
    }
    return *number;
  }

  std::vector<int64_t> pair(const toml::node& value, const std::string& path, int64_t min) {
    const toml::array* array = value.as_array();
    if (array == nullptr || array->size() != 2) {
      fail_at(origin_of_(value, path),
              fmt::format("{}: expected [height, width], two integers >= {}", path, min));
    }
    return {integer(*array->get(0), path + "[0]", min), integer(*array->get(1), path + "[1]", min)};
  }

  LayerPadding padding(const toml::node& value, const std::string& path) {
    LayerPadding padding;
    if (const auto text = value.value_exact<std::string>()) {
      if (*text != "SAME" && *text != "VALID") {
        fail_at(origin_of_(value, path),
                fmt::format("{}: expected \"SAME\" or \"VALID\", found \"{}\"", path, *text),
                key_help("padding"));
      }
      padding.mode = *text;
      return padding;
    }
    const toml::array* array = value.as_array();
    if (array == nullptr || array->size() != 2) {
      fail_at(origin_of_(value, path), path + ": expected " + key_help("padding"));
    }
    padding.mode = "explicit";
    for (size_t axis = 0; axis < 2; ++axis) {
      const std::vector<int64_t> low_high =
          pair(*array->get(axis), fmt::format("{}[{}]", path, axis), 0);
      padding.pairs.push_back({low_high[0], low_high[1]});
    }
    return padding;
  }

  bool boolean(const toml::node& value, const std::string& path, const std::string& help = "") {
    const std::optional<bool> flag = value.value_exact<bool>();
    if (!flag) fail_at(origin_of_(value, path), path + ": expected true or false", help);
    return *flag;
  }

  // A float (or an integer) within [low, high], or [low, high) when `open_high`, or (low, high]
  // when `open_low`.
  double number(const toml::node& value, const std::string& path, double low, double high,
                const char* range, bool open_high, bool open_low = false) {
    const std::optional<double> number = value.value<double>();
    const bool fits = number && (open_low ? *number > low : *number >= low) &&
                      (open_high ? *number < high : *number <= high);
    if (!fits || !(value.is_floating_point() || value.is_integer())) {
      fail_at(origin_of_(value, path), fmt::format("{}: expected a number {}", path, range),
              key_help(path.substr(path.rfind('.') + 1)));
    }
    return *number;
  }

  const NodeOrigin& origin_of_;
};

}  // namespace

std::vector<LayerSpec> read_layers(const toml::node& node, const std::string& path,
                                   const NodeOrigin& origin_of) {
  return LayerReader(origin_of).list(node, path);
}

std::vector<std::string> layer_keys(const LayerKind& kind) {
  std::vector<std::string> keys = kind.required;
  keys.insert(keys.end(), kind.optional.begin(), kind.optional.end());
  return keys;
}

void fail_unknown_layer_key(const Origin& origin, const std::string& path, const LayerKind& kind,
                            const std::string& name) {
  const std::vector<std::string> keys = layer_keys(kind);
  const std::string guess = did_you_mean(name, keys);
  fail_at(origin, fmt::format("{}: a {} layer has no key '{}'", path, kind.name, name),
          keys.empty() ? "it takes no keys"
                       : (guess.empty() ? "" : guess + " ") + "its keys: " + join(keys));
}

}  // namespace parity
