#include "case_toml.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <set>
#include <sstream>

#include "parity/common/error.h"

namespace parity::compare {
namespace {

std::optional<toml::table> parse_case(const RunDir& run) {
  if (run.info.case_toml.empty()) return std::nullopt;
  const std::string where = (run.dir / "run.json").string() + " (case.toml)";
  try {
    return toml::parse(run.info.case_toml, where);
  } catch (const toml::parse_error& error) {
    throw InputError(
        fmt::format("{}: the recorded case is not valid TOML at line {}, column {}: {}", where,
                    error.source().begin.line, error.source().begin.column, error.description()));
  }
}

std::string value_text(const toml::node& node) {
  // A float as the shortest decimal that reads back to it ("0.99", where toml++ prints
  // 0.98999999999999999), so that a differing key reads as the case file wrote it.
  if (const auto number = node.value_exact<double>()) return fmt::format("{}", *number);
  std::ostringstream text;
  node.visit([&text](const auto& value) { text << value; });
  return text.str();
}

// keys[name] = the value's text; a list of layers (an array of tables) is spread into one key
// per layer key ("model.layers[2].momentum", "model.layers[4].layers[1].epsilon"), so that two
// cases that differ in one layer's key are named by that key, not by the whole list.
void add_key(std::map<std::string, std::string>& keys, const std::string& name,
             const toml::node& value) {
  const toml::array* array = value.as_array();
  if (array == nullptr || array->empty() || !array->is_array_of_tables()) {
    keys[name] = value_text(value);
    return;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    for (const auto& [key, element] : *array->get(i)->as_table()) {
      add_key(keys, fmt::format("{}[{}].{}", name, i, key.str()), element);
    }
  }
}

}  // namespace

std::map<std::string, std::string> case_keys(const RunDir& run) {
  std::map<std::string, std::string> keys;
  const std::optional<toml::table> root = parse_case(run);
  if (!root) return keys;
  for (const auto& [section_name, section] : *root) {
    const toml::table* table = section.as_table();
    if (table == nullptr) {
      keys[std::string(section_name.str())] = value_text(section);
      continue;
    }
    for (const auto& [key, value] : *table) {
      add_key(keys, fmt::format("{}.{}", section_name.str(), key.str()), value);
    }
  }
  return keys;
}

std::vector<std::string> differing_case_keys(const std::map<std::string, std::string>& a,
                                             const std::map<std::string, std::string>& b,
                                             const std::string& label_a,
                                             const std::string& label_b) {
  std::set<std::string> names;
  for (const auto& [name, value] : a) names.insert(name);
  for (const auto& [name, value] : b) names.insert(name);
  std::vector<std::string> lines;
  for (const std::string& name : names) {
    const auto in_a = a.find(name);
    const auto in_b = b.find(name);
    const std::string value_a = in_a == a.end() ? "(absent)" : in_a->second;
    const std::string value_b = in_b == b.end() ? "(absent)" : in_b->second;
    if (value_a != value_b) {
      lines.push_back(fmt::format("{}: {} {}, {} {}", name, label_a, value_a, label_b, value_b));
    }
  }
  return lines;
}

std::vector<std::string> differing_key_names(const std::vector<std::string>& lines) {
  std::vector<std::string> names;
  for (const std::string& line : lines) names.push_back(line.substr(0, line.find(':')));
  return names;
}

std::optional<int64_t> global_batch(const RunDir& run) {
  const std::optional<toml::table> root = parse_case(run);
  if (!root) return std::nullopt;
  const std::optional<int64_t> replicas = (*root)["parallel"]["replicas"].value<int64_t>();
  const std::optional<int64_t> per_replica = (*root)["data"]["per_replica_batch"].value<int64_t>();
  const int64_t micro_batches = (*root)["train"]["grad_accum_steps"].value_or<int64_t>(1);
  if (!replicas || !per_replica) return std::nullopt;
  return *replicas * *per_replica * micro_batches;
}

}  // namespace parity::compare
