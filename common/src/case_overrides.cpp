#include "case_overrides.h"

#include <optional>

#include "case_errors.h"
#include "parity/common/error.h"

namespace parity {

namespace {

struct Override {
  std::string text;
  std::string section;
  std::string key;
  std::string value_text;
  const case_schema::KeyEntry* entry;
};

Override parse_override(const std::string& text) {
  const size_t equals = text.find('=');
  const size_t dot = text.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot > equals || dot == 0 ||
      dot + 1 == equals) {
    throw InputError("--set " + text +
                     ": expected section.key=value (for example train.lr=3e-4)");
  }
  Override parsed{text, text.substr(0, dot), text.substr(dot + 1, equals - dot - 1),
                  text.substr(equals + 1), nullptr};
  const case_schema::SectionEntry* section = case_schema::find_section(parsed.section);
  if (section == nullptr) fail_unknown_section(Origin{"", text}, parsed.section);
  parsed.entry = case_schema::find_key(*section, parsed.key);
  if (parsed.entry == nullptr) fail_unknown_key(Origin{"", text}, *section, parsed.key);
  return parsed;
}

// Parses `value_text` as a TOML value by wrapping it in "v = ...". Returns the one-key table, or
// nothing when the text is not a single TOML value.
std::optional<toml::table> parse_value(const Override& override_) {
  try {
    toml::table wrapper = toml::parse("v = " + override_.value_text, "--set " + override_.text);
    if (wrapper.size() == 1 && wrapper.contains("v")) return wrapper;
  } catch (const toml::parse_error&) {
    // Not a TOML value: the caller treats it as a bare string.
  }
  return std::nullopt;
}

void apply_override(toml::table& root, const Override& override_) {
  if (!root.contains(override_.section)) root.insert(override_.section, toml::table{});
  toml::table& section = *root[override_.section].as_table();

  const std::optional<toml::table> wrapper = parse_value(override_);
  const toml::node* value = wrapper ? wrapper->get("v") : nullptr;
  if (value == nullptr ||
      (override_.entry->kind == case_schema::Kind::kString && !value->is_string())) {
    section.insert_or_assign(override_.key, override_.value_text);
    return;
  }
  value->visit([&](const auto& typed) { section.insert_or_assign(override_.key, typed); });
}

}  // namespace

std::map<const case_schema::Key*, std::string> apply_overrides(
    toml::table& root, const std::vector<std::string>& overrides) {
  std::map<const case_schema::Key*, std::string> override_texts;
  for (const std::string& text : overrides) {
    const Override override_ = parse_override(text);
    apply_override(root, override_);
    override_texts[override_.entry->key] = text;
  }
  return override_texts;
}

}  // namespace parity
