#include "json_fields.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace parity {
namespace {

// nlohmann's message without its "[json.exception.parse_error.101] parse error at ...: " prefix.
std::string parse_error_detail(const nlohmann::json::parse_error& error) {
  const std::string what = error.what();
  const size_t colon = what.find(": ");
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// nlohmann's message without its "[json.exception.out_of_range.406] " prefix. parse() throws
// out_of_range for a number beyond a double's range ("1e309"), with no position.
std::string out_of_range_detail(const nlohmann::json::out_of_range& error) {
  const std::string what = error.what();
  const size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

struct TextPosition {
  size_t line = 1;    // 1-based
  size_t column = 1;  // 1-based
};

// `byte` is nlohmann's parse_error::byte: the 1-based index of the character it stopped at.
TextPosition position_of_byte(const std::string& text, size_t byte) {
  TextPosition position;
  const size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++position.line;
      position.column = 1;
    } else {
      ++position.column;
    }
  }
  return position;
}

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// One line of a JSON Lines file, parsed; `is_last_unterminated` marks a final line without '\n',
// which is what a producer killed mid-write leaves behind.
Json parse_json_line(const std::string& text, const std::string& where, bool is_last_unterminated) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    if (is_last_unterminated) {
      throw InputError(where + ": truncated last line (no newline and not complete JSON); the " +
                       "producer was probably killed while writing it. Rerun it, or delete the " +
                       "line to read the steps before it");
    }
    const TextPosition position = position_of_byte(text, error.byte);
    throw InputError(where + ", column " + std::to_string(position.column) +
                     ": not valid JSON: " + parse_error_detail(error));
  } catch (const nlohmann::json::out_of_range& error) {
    throw InputError(where + ": not valid JSON: " + out_of_range_detail(error));
  }
}

}  // namespace

Json number_to_json(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

std::optional<double> number_from_json(const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "Infinity") return std::numeric_limits<double>::infinity();
  if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

Json numbers_to_json(const std::vector<double>& values) {
  Json array = Json::array();
  for (double value : values) array.push_back(number_to_json(value));
  return array;
}

std::string describe_json(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(value.type_name()) + " " + text;
}

ObjectReader expect_object(const Json& value, const std::string& where, const std::string& place) {
  if (!value.is_object()) {
    throw InputError(where + ": expected a JSON object" + place + ", found " + describe_json(value));
  }
  return ObjectReader(value, where);
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path.string() + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError("cannot read " + path.string());
  return text.str();
}

Json parse_json_document(const std::string& text, const std::string& where) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    const TextPosition position = position_of_byte(text, error.byte);
    throw InputError(where + " line " + std::to_string(position.line) + ", column " +
                     std::to_string(position.column) +
                     ": not valid JSON: " + parse_error_detail(error));
  } catch (const nlohmann::json::out_of_range& error) {
    throw InputError(where + ": not valid JSON: " + out_of_range_detail(error));
  }
}

void for_each_json_line(const std::filesystem::path& path, bool being_written,
                        const std::function<void(const Json& line, const std::string& where)>& on_line) {
  if (!std::filesystem::exists(path)) {
    throw InputError("not a complete run directory: " + path.string() + " is missing");
  }
  const std::string text = read_text_file(path);
  size_t line_start = 0;
  for (size_t line_number = 1; line_start < text.size(); ++line_number) {
    const size_t newline = text.find('\n', line_start);
    const bool unterminated = newline == std::string::npos;
    const size_t line_end = unterminated ? text.size() : newline;
    const std::string line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (is_blank(line) || (unterminated && being_written)) continue;
    const std::string where = path.string() + " line " + std::to_string(line_number);
    on_line(parse_json_line(line, where, unterminated), where);
  }
}

}  // namespace parity
