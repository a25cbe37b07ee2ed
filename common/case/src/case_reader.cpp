#include "case_reader.h"

#include <fstream>
#include <optional>
#include <sstream>

#include "layer_reader.h"
#include "parity/common/error.h"

namespace parity {

namespace {

using case_schema::Key;
using case_schema::Kind;

std::string position(const std::filesystem::path& file, const toml::source_region& region) {
  return file.string() + ":" + std::to_string(region.begin.line) + ":" +
         std::to_string(region.begin.column);
}

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString: return "a string";
    case Kind::kInteger: return "an integer";
    case Kind::kFloat: return "a float";
    case Kind::kBool: return "a boolean";
    case Kind::kIntegerList: return "an array of integers";
    case Kind::kStringList: return "an array of strings";
    case Kind::kLayerList: return "an array of layer tables";
  }
  return "?";
}

std::string found_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError("case file " + file.string() + " cannot be opened for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class CaseReader {
 public:
  CaseReader(const toml::table& root, std::filesystem::path file,
             const OverrideOrigins& override_origins, KeyOrigins& origins)
      : root_(root),
        file_(std::move(file)),
        override_origins_(override_origins),
        origins_(origins) {}

  void read(const Key& key, std::string& out) {
    if (const toml::node* node = lookup(key)) {
      if (!node->is_string()) fail_kind(key, Kind::kString, *node);
      out = node->as_string()->get();
    }
  }

  void read(const Key& key, int64_t& out) {
    if (const toml::node* node = lookup(key)) {
      if (!node->is_integer()) fail_kind(key, Kind::kInteger, *node);
      out = node->as_integer()->get();
    }
  }

  // Seeds: integers that must not be negative (they become uint64 seeds of both engines).
  void read(const Key& key, uint64_t& out) {
    int64_t value = static_cast<int64_t>(out);
    read(key, value);
    if (value < 0) {
      fail_at(origins_.of(key),
              key.dotted() + ": expected an integer >= 0, found " + std::to_string(value));
    }
    out = static_cast<uint64_t>(value);
  }

  // Integers are accepted where floats are expected (lr = 1 means 1.0).
  void read(const Key& key, double& out) {
    if (const toml::node* node = lookup(key)) {
      if (node->is_integer()) {
        out = static_cast<double>(node->as_integer()->get());
      } else if (node->is_floating_point()) {
        out = node->as_floating_point()->get();
      } else {
        fail_kind(key, Kind::kFloat, *node);
      }
    }
  }

  void read(const Key& key, bool& out) {
    if (const toml::node* node = lookup(key)) {
      if (!node->is_boolean()) fail_kind(key, Kind::kBool, *node);
      out = node->as_boolean()->get();
    }
  }

  void read(const Key& key, std::vector<int64_t>& out) {
    read_list<int64_t>(key, Kind::kIntegerList, "an integer", out);
  }

  void read(const Key& key, std::vector<std::string>& out) {
    read_list<std::string>(key, Kind::kStringList, "a string", out);
    remember_element_origins(key);
  }

  void read(const Key& key, std::vector<LayerSpec>& out) {
    const toml::node* node = lookup(key);
    if (node == nullptr) return;
    out = read_layers(*node, key.dotted(), [&](const toml::node& element, const std::string& path) {
      return origin_at(path, element);
    });
  }

 private:
  // An array whose elements are all T (int64_t or std::string).
  template <typename T>
  void read_list(const Key& key, Kind kind, const char* element_kind, std::vector<T>& out) {
    const toml::node* node = lookup(key);
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) fail_kind(key, kind, *node);
    out.clear();
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::optional<T> value = element.value_exact<T>();
      if (!value) {
        const std::string path = element_path(key, i);
        fail_at(origin_at(path, element),
                path + ": expected " + element_kind + ", found " + found_name(element));
      }
      out.push_back(*value);
    }
  }

  // Where each element of a string list was written: an entry of scenario.engine_overrides is
  // named by its own line when the engine's case refuses it. (Not for the integer lists, which
  // may hold a million widths.)
  void remember_element_origins(const Key& key) {
    const toml::table* table = root_[key.section.name].as_table();
    const toml::array* array = table != nullptr ? table->get_as<toml::array>(key.name) : nullptr;
    if (array == nullptr) return;
    for (size_t i = 0; i < array->size(); ++i) {
      origins_.set(key, i, origin_at(element_path(key, i), *array->get(i)));
    }
  }

  static std::string element_path(const Key& key, size_t index) {
    return key.dotted() + "[" + std::to_string(index) + "]";
  }

  const toml::node* lookup(const Key& key) {
    const toml::table* table = root_[key.section.name].as_table();
    const toml::node* node = table != nullptr ? table->get(key.name) : nullptr;
    if (node != nullptr) origins_.set(key, origin_at(key.dotted(), *node));
    return node;
  }

  // The override that set the value at `path` (or one inside it), else the node's place in the
  // file.
  Origin origin_at(const std::string& path, const toml::node& node) const {
    if (const Origin* override_origin = override_origins_.find(path)) return *override_origin;
    return Origin{position(file_, node.source()), ""};
  }

  [[noreturn]] void fail_kind(const Key& key, Kind expected, const toml::node& node) {
    fail_at(origins_.of(key), key.dotted() + ": expected " + kind_name(expected) + ", found " +
                                  found_name(node));
  }

  const toml::table& root_;
  std::filesystem::path file_;
  const OverrideOrigins& override_origins_;
  KeyOrigins& origins_;
};

}  // namespace

toml::table parse_case_file(const std::filesystem::path& file) {
  return parse_case_text(read_text_file(file), file);
}

toml::table parse_case_text(const std::string& text, const std::filesystem::path& file) {
  try {
    return toml::parse(text, file.string());
  } catch (const toml::parse_error& error) {
    throw InputError(position(file, error.source()) + ": TOML syntax error: " +
                     std::string(error.description()));
  }
}

void check_structure(const toml::table& root, const std::filesystem::path& file) {
  for (auto&& [section_key, section_node] : root) {
    const Origin origin{position(file, section_key.source()), ""};
    const std::string section_name(section_key.str());
    const case_schema::SectionEntry* section = case_schema::find_section(section_name);
    if (section == nullptr) fail_unknown_section(origin, section_name);
    const toml::table* table = section_node.as_table();
    if (table == nullptr) {
      fail_at(origin, section_name + ": expected a table ([" + section_name + "]), found " +
                          found_name(section_node));
    }
    for (auto&& [key, node] : *table) {
      const std::string key_name(key.str());
      if (case_schema::find_key(*section, key_name) == nullptr) {
        fail_unknown_key(Origin{position(file, key.source()), ""}, *section, key_name);
      }
    }
  }
}

CaseSpec read_case(const toml::table& root, const std::filesystem::path& file,
                   const OverrideOrigins& override_origins, KeyOrigins& origins) {
  CaseSpec spec;
  CaseReader reader(root, file, override_origins, origins);
  case_schema::for_each_case_key(spec, [&](const Key& key, auto& field) { reader.read(key, field); });
  return spec;
}

}  // namespace parity
