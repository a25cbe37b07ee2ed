#include "case_schema.h"

namespace parity::case_schema {

namespace {

// A field's C++ type gives its key's TOML type.
Kind kind_of(const std::string&) { return Kind::kString; }
Kind kind_of(const int64_t&) { return Kind::kInteger; }
Kind kind_of(const uint64_t&) { return Kind::kInteger; }
Kind kind_of(const double&) { return Kind::kFloat; }
Kind kind_of(const bool&) { return Kind::kBool; }
Kind kind_of(const std::vector<int64_t>&) { return Kind::kIntegerList; }
Kind kind_of(const std::vector<std::string>&) { return Kind::kStringList; }
Kind kind_of(const std::vector<LayerSpec>&) { return Kind::kLayerList; }

std::vector<SectionEntry> collect_sections() {
  std::vector<SectionEntry> entries;
  const CaseSpec defaults;
  for_each_case_key(defaults, [&](const Key& key, const auto& field) {
    if (entries.empty() || entries.back().section != &key.section) {
      entries.push_back({&key.section, {}});
    }
    entries.back().keys.push_back({&key, kind_of(field)});
  });
  return entries;
}

}  // namespace

Rule one_of(const std::vector<std::string>& allowed) {
  Rule rule;
  rule.one_of = &allowed;
  return rule;
}

Rule at_least(int64_t min) {
  Rule rule;
  rule.min = min;
  return rule;
}

Rule between(int64_t min, int64_t max) {
  Rule rule = at_least(min);
  rule.max = max;
  return rule;
}

Rule in_range(FloatRange range) {
  Rule rule;
  rule.range = range;
  return rule;
}

std::string Key::dotted() const {
  return std::string(section.name) + "." + std::string(name);
}

const std::vector<SectionEntry>& sections() {
  static const std::vector<SectionEntry> entries = collect_sections();
  return entries;
}

const SectionEntry* find_section(std::string_view name) {
  for (const SectionEntry& section : sections()) {
    if (name == section.section->name) return &section;
  }
  return nullptr;
}

const KeyEntry* find_key(const SectionEntry& section, std::string_view name) {
  for (const KeyEntry& key : section.keys) {
    if (name == key.key->name) return &key;
  }
  return nullptr;
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const SectionEntry& section : sections()) names.emplace_back(section.section->name);
  return names;
}

std::vector<std::string> key_names(const SectionEntry& section) {
  std::vector<std::string> names;
  for (const KeyEntry& key : section.keys) names.emplace_back(key.key->name);
  return names;
}

}  // namespace parity::case_schema
