#include "case_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace parity {

namespace {

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_value(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c == '\n') {
      quoted += "\\n";
    } else if (c == '\t') {
      quoted += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", byte);
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string toml_value(int64_t value) { return std::to_string(value); }
std::string toml_value(uint64_t value) { return std::to_string(value); }
std::string toml_value(double value) { return format_float(value); }
std::string toml_value(bool value) { return value ? "true" : "false"; }

std::string toml_value(const LayerSpec& layer);

template <typename T>
std::string toml_value(const std::vector<T>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i == 0 ? "" : ", ") + toml_value(values[i]);
  return text + "]";
}

std::string toml_value(const LayerPadding& padding) {
  if (padding.mode != "explicit") return toml_value(padding.mode);
  std::vector<std::vector<int64_t>> pairs;
  for (const auto& [low, high] : padding.pairs) pairs.push_back({low, high});
  return toml_value(pairs);
}

// The value of one of a layer's keys (model_layers.h: which field each key reads); nothing for
// an optional key at its default.
std::string layer_key_value(const LayerSpec& layer, const std::string& key, bool required) {
  const LayerSpec defaults;
  if (key == "features" || key == "hidden") return toml_value(layer.features);
  if (key == "heads") return toml_value(layer.heads);
  if (key == "kernel" || key == "window" || key == "patch") return toml_value(layer.kernel);
  if (key == "strides") return layer.strides.empty() ? "" : toml_value(layer.strides);
  if (key == "padding") {
    return required || !(layer.padding == defaults.padding) ? toml_value(layer.padding) : "";
  }
  if (key == "use_bias") return layer.use_bias == defaults.use_bias ? "" : toml_value(layer.use_bias);
  if (key == "count_include_pad") {
    return layer.count_include_pad == defaults.count_include_pad
               ? ""
               : toml_value(layer.count_include_pad);
  }
  if (key == "sync") return layer.sync == defaults.sync ? "" : toml_value(layer.sync);
  if (key == "use_fast_variance") {
    return layer.use_fast_variance == defaults.use_fast_variance
               ? ""
               : toml_value(layer.use_fast_variance);
  }
  if (key == "approximate") return toml_value(layer.approximate);
  if (key == "rate") return required || layer.rate != defaults.rate ? toml_value(layer.rate) : "";
  if (key == "momentum") return toml_value(layer.momentum);
  if (key == "epsilon") return toml_value(layer.epsilon);
  if (key == "layers") return toml_value(layer.layers);
  if (key == "projection") return layer.projection.empty() ? "" : toml_value(layer.projection);
  return "";
}

// An inline table, its keys in the kind's canonical order.
std::string toml_value(const LayerSpec& layer) {
  std::string text = "{ kind = " + toml_value(layer.kind);
  const LayerKind* kind = find_layer_kind(layer.kind);
  for (int pass = 0; kind != nullptr && pass < 2; ++pass) {
    for (const std::string& key : pass == 0 ? kind->required : kind->optional) {
      const std::string value = layer_key_value(layer, key, pass == 0);
      if (!value.empty()) text += ", " + key + " = " + value;
    }
  }
  return text + " }";
}

}  // namespace

std::string format_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string result(text);
  if (result.find_first_of(".e") == std::string::npos) result += ".0";
  return result;
}

std::string case_toml(const CaseSpec& spec,
                      const std::function<bool(const case_schema::Section&)>& wanted) {
  static const std::map<const case_schema::Key*, std::string> defaults = [] {
    std::map<const case_schema::Key*, std::string> values;
    const CaseSpec initial;
    case_schema::for_each_case_key(initial, [&](const case_schema::Key& key, const auto& value) {
      values[&key] = toml_value(value);
    });
    return values;
  }();
  std::string text;
  const case_schema::Section* current = nullptr;
  case_schema::for_each_case_key(spec, [&](const case_schema::Key& key, const auto& value) {
    if (!wanted(key.section)) return;
    const std::string written = toml_value(value);
    if (!key.written_when_default && written == defaults.at(&key)) return;
    if (&key.section != current) {
      text += std::string(current == nullptr ? "" : "\n") + "[" + std::string(key.section.name) +
              "]\n";
      current = &key.section;
    }
    text += std::string(key.name) + " = " + written + "\n";
  });
  return text;
}

}  // namespace parity
