#include "case_overrides.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "layer_reader.h"
#include "parity/common/model_layers.h"

namespace parity {

namespace {

// One step into a layer list: the layer at `index`, then its key `key` (the value's key on the
// last step, a list key, layers or projection, before a further step).
struct LayerStep {
  size_t index;
  std::string key;
};

struct Override {
  Origin origin;
  std::string section;
  std::string key;
  std::vector<LayerStep> steps;  // empty: the schema key itself
  std::string value_text;
  const case_schema::KeyEntry* entry = nullptr;

  // "train.lr", "model.layers[4].layers[1].epsilon": the path the layer reader names it by.
  std::string path() const {
    std::string text = section + "." + key;
    for (const LayerStep& step : steps) text += fmt::format("[{}].{}", step.index, step.key);
    return text;
  }
};

[[noreturn]] void fail_grammar(const Origin& origin) {
  fail_at(origin, "expected section.key=value (for example train.lr=3e-4)",
          "a layer's key is model.layers[INDEX].key=value (model.layers[2].momentum=0.99; inside "
          "a residual model.layers[4].layers[1].epsilon=1e-6)");
}

// True when `inner` is `outer` or a path inside it ("model.layers[2].momentum" inside
// "model.layers"), not merely a longer name ("train.lr_decay" is not inside "train.lr").
bool holds(const std::string& outer, const std::string& inner) {
  return inner.compare(0, outer.size(), outer) == 0 &&
         (inner.size() == outer.size() || inner[outer.size()] == '.' ||
          inner[outer.size()] == '[');
}

// A name up to the next '[', '.' or the end; empty when there is none.
std::string take_name(const std::string& text, size_t& at) {
  const size_t end = std::min(text.find_first_of("[.", at), text.size());
  std::string name = text.substr(at, end - at);
  at = end;
  return name;
}

// "[12].name" at `at`, as one step; nothing when the text there is not of that form.
std::optional<LayerStep> take_step(const std::string& text, size_t& at) {
  if (at >= text.size() || text[at] != '[') return std::nullopt;
  const size_t close = text.find(']', at);
  if (close == std::string::npos || close == at + 1 || close - at > 10 || close + 1 >= text.size() ||
      text[close + 1] != '.') {
    return std::nullopt;
  }
  const std::string digits = text.substr(at + 1, close - at - 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(c) != 0; })) {
    return std::nullopt;
  }
  at = close + 2;
  LayerStep step{static_cast<size_t>(std::stoull(digits)), take_name(text, at)};
  if (step.key.empty()) return std::nullopt;
  return step;
}

Override parse_override(const Origin& origin) {
  const std::string& text = origin.override_text;
  const size_t equals = text.find('=');
  const std::string path = text.substr(0, equals);
  const size_t dot = path.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot == 0) {
    fail_grammar(origin);
  }
  Override parsed{origin, path.substr(0, dot), "", {}, text.substr(equals + 1)};
  size_t at = dot + 1;
  parsed.key = take_name(path, at);
  while (at < path.size()) {
    const std::optional<LayerStep> step = take_step(path, at);
    if (!step) fail_grammar(origin);
    parsed.steps.push_back(*step);
  }
  if (parsed.key.empty()) fail_grammar(origin);
  const case_schema::SectionEntry* section = case_schema::find_section(parsed.section);
  if (section == nullptr) fail_unknown_section(origin, parsed.section);
  parsed.entry = case_schema::find_key(*section, parsed.key);
  if (parsed.entry == nullptr) fail_unknown_key(origin, *section, parsed.key);
  if (!parsed.steps.empty() && parsed.entry->kind != case_schema::Kind::kLayerList) {
    fail_at(origin, fmt::format("{}.{} is not a list of layers, so it takes no [index]",
                                parsed.section, parsed.key),
            "only model.layers does (model.layers[2].momentum=0.99); set the whole value: " +
                parsed.section + "." + parsed.key + "=...");
  }
  return parsed;
}

// Parses `value_text` as a TOML value by wrapping it in "v = ...". Returns the one-key table, or
// nothing when the text is not a single TOML value.
std::optional<toml::table> parse_value(const Override& override_) {
  try {
    toml::table wrapper = toml::parse("v = " + override_.value_text, override_.origin.override_text);
    if (wrapper.size() == 1 && wrapper.contains("v")) return wrapper;
  } catch (const toml::parse_error&) {
    // Not a TOML value: the caller treats it as a bare string.
  }
  return std::nullopt;
}

// Sets `table[key]` to the override's value: parsed as TOML, or the text itself when it is not
// a TOML value or `as_string` (a string key given 42 means the text "42").
void assign(toml::table& table, const std::string& key, const Override& override_,
            bool as_string) {
  const std::optional<toml::table> wrapper = parse_value(override_);
  const toml::node* value = wrapper ? wrapper->get("v") : nullptr;
  if (value == nullptr || (as_string && !value->is_string())) {
    table.insert_or_assign(key, override_.value_text);
    return;
  }
  value->visit([&](const auto& typed) { table.insert_or_assign(key, typed); });
}

// The layer table at step `step` of `layers` (the list at `path`), refused with the list's size
// when there is no such layer.
toml::table& layer_at(toml::array& layers, const std::string& path, const LayerStep& step,
                      const Origin& origin) {
  if (step.index >= layers.size()) {
    fail_at(origin,
            fmt::format("{}[{}]: there is no such layer; {} holds {} layer(s), {}[0] to {}[{}]",
                        path, step.index, path, layers.size(), path, path, layers.size() - 1),
            "layers are counted from 0 in the order the case lists them (parity cases show "
            "CASE prints them)");
  }
  toml::table* layer = layers.get(step.index)->as_table();
  if (layer == nullptr) {
    fail_at(origin, fmt::format("{}[{}]: expected a layer table {{ kind = \"...\", ... }}", path,
                                step.index));
  }
  return *layer;
}

// Walks model.layers[i](.layers|.projection[j])*.key and sets that key of the last layer, once
// each step names a layer that exists and a key its kind takes.
void apply_layer_override(toml::table& section, const Override& override_) {
  std::string path = override_.section + "." + override_.key;
  toml::array* layers = section[override_.key].as_array();
  if (layers == nullptr) {
    fail_at(override_.origin, path + ": the case lists no layers to address",
            "a widths model's layers are model.widths; set it whole");
  }
  for (size_t i = 0; i < override_.steps.size(); ++i) {
    const LayerStep& step = override_.steps[i];
    toml::table& layer = layer_at(*layers, path, step, override_.origin);
    path += fmt::format("[{}]", step.index);
    // A layer of an unknown kind is the reader's to refuse, at its place in the file.
    const LayerKind* kind = find_layer_kind(layer["kind"].value_or(std::string()));
    if (kind != nullptr) {
      const std::vector<std::string> keys = layer_keys(*kind);
      if (std::find(keys.begin(), keys.end(), step.key) == keys.end()) {
        fail_unknown_layer_key(override_.origin, path, *kind, step.key);
      }
    }
    if (i + 1 == override_.steps.size()) {
      assign(layer, step.key, override_, false);
      return;
    }
    layers = layer[step.key].as_array();
    if (layers == nullptr) {
      fail_at(override_.origin,
              fmt::format("{}.{}: the {} layer has no {} list to index", path, step.key,
                          kind != nullptr ? kind->name : "", step.key),
              fmt::format("set it whole: {}.{}=[...]", path, step.key));
    }
    path += "." + step.key;
  }
}

void apply_override(toml::table& root, const Override& override_) {
  if (!root.contains(override_.section)) root.insert(override_.section, toml::table{});
  toml::table& section = *root[override_.section].as_table();
  if (override_.steps.empty()) {
    assign(section, override_.key, override_,
           override_.entry->kind == case_schema::Kind::kString);
  } else {
    apply_layer_override(section, override_);
  }
}

}  // namespace

void OverrideOrigins::add(std::string path, Origin origin) {
  entries_.emplace_back(std::move(path), std::move(origin));
}

const Origin* OverrideOrigins::find(const std::string& path) const {
  for (auto entry = entries_.rbegin(); entry != entries_.rend(); ++entry) {
    if (holds(entry->first, path)) return &entry->second;
  }
  for (auto entry = entries_.rbegin(); entry != entries_.rend(); ++entry) {
    if (holds(path, entry->first)) return &entry->second;
  }
  return nullptr;
}

std::vector<Origin> command_line_overrides(const std::vector<std::string>& texts) {
  std::vector<Origin> overrides;
  for (const std::string& text : texts) overrides.push_back(Origin{"", text});
  return overrides;
}

OverrideOrigins apply_overrides(toml::table& root, const std::vector<Origin>& overrides) {
  OverrideOrigins origins;
  for (const Origin& origin : overrides) {
    const Override override_ = parse_override(origin);
    apply_override(root, override_);
    origins.add(override_.path(), origin);
  }
  return origins;
}

}  // namespace parity
