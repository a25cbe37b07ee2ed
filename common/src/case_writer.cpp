#include "case_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

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

template <typename T>
std::string toml_value(const std::vector<T>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i == 0 ? "" : ", ") + toml_value(values[i]);
  return text + "]";
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
  std::string text;
  const case_schema::Section* current = nullptr;
  case_schema::for_each_case_key(spec, [&](const case_schema::Key& key, const auto& value) {
    if (!wanted(key.section)) return;
    if (&key.section != current) {
      text += std::string(current == nullptr ? "" : "\n") + "[" + std::string(key.section.name) +
              "]\n";
      current = &key.section;
    }
    text += std::string(key.name) + " = " + toml_value(value) + "\n";
  });
  return text;
}

}  // namespace parity
