// Reading and writing parity's JSON files (run.json, metrics.jsonl, rng.jsonl) with errors that
// name the file, the line and the key path. Internal to parity_run_dir.
//
// Non-finite numbers. JSON has no NaN or infinity (nlohmann would write them as null, losing
// which one it was), yet a diverging run is exactly what the harness must see. Every double is
// therefore written as a JSON number when finite and as one of the strings "NaN", "Infinity",
// "-Infinity" otherwise (the spellings of JavaScript and Python's json module), and the reader
// accepts either form wherever a number is expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/error.h"

namespace parity {

using Json = nlohmann::ordered_json;  // keeps keys in the order written, for people reading files

Json number_to_json(double value);
std::optional<double> number_from_json(const Json& value);
Json numbers_to_json(const std::vector<double>& values);

// "number 1.5", "string \"abc\"": a value's type and its start, for error messages.
std::string describe_json(const Json& value);

class ObjectReader {
 public:
  // `where` names the file (and line); `prefix` is the key path of `object` ("" at the top).
  ObjectReader(const Json& object, std::string where, std::string prefix = "")
      : object_(object), where_(std::move(where)), prefix_(std::move(prefix)) {}

  const Json& field(const std::string& key) const {
    const auto found = object_.find(key);
    if (found == object_.end()) {
      throw InputError(where_ + ": missing key \"" + path(key) + "\"");
    }
    return *found;
  }

  bool has(const std::string& key) const { return object_.contains(key); }

  std::string string(const std::string& key) const {
    const Json& value = field(key);
    if (!value.is_string()) fail_type(key, "a string", value);
    return value.get<std::string>();
  }

  int64_t integer(const std::string& key) const {
    const Json& value = field(key);
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      fail_type(key, "an integer", value);
    }
    return value.get<int64_t>();
  }

  uint64_t unsigned_integer(const std::string& key) const {
    const Json& value = field(key);
    if (!value.is_number_unsigned()) fail_type(key, "a non-negative integer", value);
    return value.get<uint64_t>();
  }

  double number(const std::string& key) const {
    const Json& value = field(key);
    const std::optional<double> number = number_from_json(value);
    if (!number) fail_type(key, kNumberExpectation, value);
    return *number;
  }

  std::vector<double> numbers(const std::string& key) const {
    std::vector<double> values;
    for (const Json& element : array(key)) {
      const std::optional<double> number = number_from_json(element);
      if (!number)
        fail_type(key + "[" + std::to_string(values.size()) + "]", kNumberExpectation, element);
      values.push_back(*number);
    }
    return values;
  }

  std::vector<int64_t> integers(const std::string& key) const {
    std::vector<int64_t> values;
    for (const Json& element : array(key)) {
      if (!element.is_number_integer()) {
        fail_type(key + "[" + std::to_string(values.size()) + "]", "an integer", element);
      }
      values.push_back(element.get<int64_t>());
    }
    return values;
  }

  std::vector<std::string> strings(const std::string& key) const {
    std::vector<std::string> values;
    for (const Json& element : array(key)) {
      if (!element.is_string()) {
        fail_type(key + "[" + std::to_string(values.size()) + "]", "a string", element);
      }
      values.push_back(element.get<std::string>());
    }
    return values;
  }

  ObjectReader object(const std::string& key) const {
    const Json& value = field(key);
    if (!value.is_object()) fail_type(key, "an object", value);
    return ObjectReader(value, where_, path(key) + ".");
  }

  std::map<std::string, std::string> string_map(const std::string& key) const {
    const ObjectReader map_reader = object(key);
    std::map<std::string, std::string> values;
    for (const auto& item : map_reader.object_.items())
      values[item.key()] = map_reader.string(item.key());
    return values;
  }

  std::map<std::string, double> number_map(const std::string& key) const {
    const ObjectReader map_reader = object(key);
    std::map<std::string, double> values;
    for (const auto& item : map_reader.object_.items())
      values[item.key()] = map_reader.number(item.key());
    return values;
  }

 private:
  static constexpr const char* kNumberExpectation =
      "a number (or \"NaN\", \"Infinity\", \"-Infinity\")";

  std::string path(const std::string& key) const { return prefix_ + key; }

  const Json& array(const std::string& key) const {
    const Json& value = field(key);
    if (!value.is_array()) fail_type(key, "an array", value);
    return value;
  }

  [[noreturn]] void fail_type(const std::string& key, const char* expected,
                              const Json& found) const {
    throw InputError(where_ + ": key \"" + path(key) + "\": expected " + expected + ", found " +
                     describe_json(found));
  }

  const Json& object_;
  std::string where_;
  std::string prefix_;
};

// A reader of `value`, the object of a whole document or of one JSON Lines line; InputError
// "WHERE: expected a JSON object[ PLACE], found ..." when it is something else. `place` says
// where in the file it stands, when the file is not JSON Lines (" at the top level").
ObjectReader expect_object(const Json& value, const std::string& where,
                           const std::string& place = "");

std::string read_text_file(const std::filesystem::path& path);

// A whole JSON document (run.json); parse errors name `where`, the line and the column.
Json parse_json_document(const std::string& text, const std::string& where);

// Each non-blank line of a JSON Lines file, parsed, with its "FILE line N" for messages. A
// last line without '\n' that is not complete JSON is refused as truncated (a producer killed
// mid-write), unless `being_written`: then it is the line its producer is writing at this moment
// and is left out. InputError when the file is missing.
void for_each_json_line(const std::filesystem::path& path, bool being_written,
                        const std::function<void(const Json& line, const std::string& where)>& on_line);

}  // namespace parity
