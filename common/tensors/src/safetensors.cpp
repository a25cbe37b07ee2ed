// safetensors reader and writer (format: huggingface/safetensors README; validation follows the
// reference implementation, safetensors/src/tensor.rs).
//
// Vocabulary:
//   file        = header length (8 bytes, little-endian u64 N) | header (N bytes of JSON) | data
//   header      = JSON object: tensor name -> entry, plus an optional "__metadata__" string map
//   entry       = {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//   data buffer = everything after the header; begin/end are byte offsets into it
// The reference requires the entries, sorted by offsets, to tile the data buffer exactly: the
// first starts at 0, each starts where the previous ended, the last ends at the end of the
// file. We enforce the same, so overlapping tensors, holes and trailing bytes are all errors.
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "parity/common/error.h"
#include "parity/common/tensor_file.h"
#include "tensor_file_util.h"

namespace parity {
namespace {

using nlohmann::json;
using tensor_file::BoundedReader;

constexpr size_t kHeaderLengthNumBytes = 8;
// The reference rejects headers above 100 MB (MAX_HEADER_SIZE = 100_000_000).
constexpr size_t kMaxHeaderNumBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kFormat = "safetensors file";

// One validated header entry; begin/end are offsets into the data buffer.
struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  size_t begin = 0;
  size_t end = 0;
};

std::string offsets_to_string(size_t begin, size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// ---- reading ------------------------------------------------------------------------------

// Returns N, the header's length, after checking that the header fits in the file.
size_t read_header_num_bytes(BoundedReader& file) {
  if (file.file_num_bytes() < kHeaderLengthNumBytes) {
    file.fail("file is " + std::to_string(file.file_num_bytes()) +
              " bytes, shorter than the 8-byte header length that starts every safetensors file");
  }
  unsigned char length_bytes[kHeaderLengthNumBytes];
  file.read_at(0, length_bytes, kHeaderLengthNumBytes);
  uint64_t header_num_bytes = tensor_file::load_le(length_bytes, kHeaderLengthNumBytes);
  if (header_num_bytes > kMaxHeaderNumBytes) {
    file.fail("header length " + std::to_string(header_num_bytes) +
              " bytes exceeds the 100000000-byte limit of the safetensors reference "
              "implementation (is this a safetensors file?)");
  }
  size_t available_num_bytes = file.file_num_bytes() - kHeaderLengthNumBytes;
  if (header_num_bytes > available_num_bytes) {
    file.fail("header length " + std::to_string(header_num_bytes) + " bytes is larger than the " +
              std::to_string(available_num_bytes) +
              " bytes that follow the length field (truncated file?)");
  }
  return static_cast<size_t>(header_num_bytes);
}

json parse_header_json(BoundedReader& file, size_t header_num_bytes) {
  std::string header_text(header_num_bytes, '\0');
  file.read_at(kHeaderLengthNumBytes, header_text.data(), header_num_bytes);
  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::parse_error& error) {
    file.fail(std::string("header is not valid JSON: ") + error.what());
  } catch (const json::out_of_range& error) {
    // The one other error parse() throws: a number beyond a double's range ("1e400").
    file.fail(std::string("header is not valid JSON: ") + error.what());
  }
  if (!header.is_object()) {
    file.fail(std::string("header is a JSON ") + header.type_name() +
              ", expected an object mapping tensor names to entries");
  }
  return header;
}

std::map<std::string, std::string> parse_metadata(BoundedReader& file, const json& header) {
  std::map<std::string, std::string> metadata;
  auto found = header.find(kMetadataKey);
  if (found == header.end()) return metadata;
  if (!found->is_object()) {
    file.fail(std::string("\"__metadata__\" is a JSON ") + found->type_name() +
              ", expected an object mapping strings to strings");
  }
  for (const auto& [key, value] : found->items()) {
    if (!value.is_string()) {
      file.fail("\"__metadata__\" value of key '" + key + "' is a JSON " + value.type_name() +
                ", expected a string (metadata must be a string-to-string map)");
    }
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

// Fails with a message naming the tensor.
[[noreturn]] void fail_entry(BoundedReader& file, const std::string& name,
                             const std::string& problem) {
  file.fail("tensor '" + name + "': " + problem);
}

const json& entry_field(BoundedReader& file, const std::string& name, const json& entry,
                        const char* key, const char* expected) {
  auto found = entry.find(key);
  if (found == entry.end()) {
    fail_entry(file, name, std::string("entry has no \"") + key + "\" (expected " + expected + ")");
  }
  return *found;
}

// Fails naming the JSON type `key` holds and the one it should.
[[noreturn]] void fail_entry_type(BoundedReader& file, const std::string& name, const char* key,
                                  const json& value, const char* expected) {
  fail_entry(file, name,
             std::string("\"") + key + "\" is a JSON " + value.type_name() + ", expected " +
                 expected);
}

DType parse_dtype(BoundedReader& file, const std::string& name, const json& entry) {
  const json& value = entry_field(file, name, entry, "dtype", "a dtype string such as \"F32\"");
  if (!value.is_string()) fail_entry_type(file, name, "dtype", value, "a string such as \"F32\"");
  std::string dtype_text = value.get<std::string>();
  std::optional<DType> dtype = dtype_from_name(dtype_text);
  if (!dtype) {
    fail_entry(file, name,
               "unknown dtype \"" + dtype_text +
                   "\"; parity reads these dtypes: " + tensor_file::known_dtype_names());
  }
  return *dtype;
}

Shape parse_shape(BoundedReader& file, const std::string& name, const json& entry) {
  const json& value = entry_field(file, name, entry, "shape", "an array of dimensions");
  if (!value.is_array()) {
    fail_entry_type(file, name, "shape", value, "an array of non-negative integers");
  }
  Shape shape;
  for (size_t axis = 0; axis < value.size(); ++axis) {
    const json& dim = value[axis];
    std::string where = "\"shape\" dimension " + std::to_string(axis) + " (" + dim.dump() + ")";
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {
      fail_entry(file, name, where + " is negative; expected a non-negative integer");
    }
    if (!dim.is_number_unsigned()) {
      fail_entry(file, name, where + " is not an integer; expected a non-negative integer");
    }
    uint64_t dim_value = dim.get<uint64_t>();
    if (dim_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_entry(file, name, where + " is too large for a tensor dimension");
    }
    shape.push_back(static_cast<int64_t>(dim_value));
  }
  return shape;
}

// Fills entry.begin/end from "data_offsets" and checks begin <= end <= data_num_bytes.
void parse_offsets(BoundedReader& file, const json& json_entry, size_t data_num_bytes,
                   TensorEntry& entry) {
  const json& value = entry_field(file, entry.name, json_entry, "data_offsets", "[begin, end]");
  bool valid = value.is_array() && value.size() == 2 && value[0].is_number_unsigned() &&
               value[1].is_number_unsigned();
  if (!valid) {
    fail_entry(file, entry.name,
               "\"data_offsets\" is " + value.dump() +
                   ", expected [begin, end], two non-negative integers");
  }
  uint64_t begin = value[0].get<uint64_t>();
  uint64_t end = value[1].get<uint64_t>();
  if (begin > end) {
    fail_entry(file, entry.name,
               "\"data_offsets\" " + value.dump() + " have begin > end; expected begin <= end");
  }
  if (end > data_num_bytes) {
    fail_entry(file, entry.name,
               "\"data_offsets\" " + value.dump() + " end beyond the data buffer, which holds " +
                   std::to_string(data_num_bytes) + " bytes");
  }
  entry.begin = static_cast<size_t>(begin);
  entry.end = static_cast<size_t>(end);
}

TensorEntry parse_entry(BoundedReader& file, const std::string& name, const json& json_entry,
                        size_t data_num_bytes) {
  if (!json_entry.is_object()) {
    fail_entry(file, name,
               std::string("entry is a JSON ") + json_entry.type_name() +
                   ", expected an object with \"dtype\", \"shape\", \"data_offsets\"");
  }
  TensorEntry entry;
  entry.name = name;
  entry.dtype = parse_dtype(file, name, json_entry);
  entry.shape = parse_shape(file, name, json_entry);
  parse_offsets(file, json_entry, data_num_bytes, entry);

  std::optional<size_t> expected_num_bytes =
      tensor_file::checked_tensor_num_bytes(entry.shape, entry.dtype);
  std::string described = "dtype " + std::string(dtype_name(entry.dtype)) + " and shape " +
                          shape_to_string(entry.shape);
  if (!expected_num_bytes) fail_entry(file, name, described + " overflow the size of a tensor");
  size_t actual_num_bytes = entry.end - entry.begin;
  if (actual_num_bytes != *expected_num_bytes) {
    fail_entry(file, name,
               "\"data_offsets\" " + offsets_to_string(entry.begin, entry.end) + " span " +
                   std::to_string(actual_num_bytes) + " bytes, but " + described + " need " +
                   std::to_string(*expected_num_bytes) + " bytes");
  }
  return entry;
}

// Checks that the entries, sorted by offsets, tile [0, data_num_bytes) exactly (see the
// vocabulary at the top). Sorts `entries` by offset.
void check_layout(BoundedReader& file, std::vector<TensorEntry>& entries,
                  size_t data_num_bytes) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  size_t expected_begin = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& entry : entries) {
    std::string offsets = offsets_to_string(entry.begin, entry.end);
    if (entry.begin < expected_begin) {
      fail_entry(file, entry.name,
                 "\"data_offsets\" " + offsets + " overlap tensor '" + previous->name + "' at " +
                     offsets_to_string(previous->begin, previous->end) +
                     "; expected tensors to be stored one after another without overlap");
    }
    if (entry.begin > expected_begin) {
      fail_entry(file, entry.name,
                 "\"data_offsets\" " + offsets + " leave a hole of " +
                     std::to_string(entry.begin - expected_begin) + " unused bytes at offset " +
                     std::to_string(expected_begin) + "; expected begin " +
                     std::to_string(expected_begin) +
                     " (safetensors requires a contiguous data buffer)");
    }
    expected_begin = entry.end;
    previous = &entry;
  }
  if (expected_begin != data_num_bytes) {
    file.fail("the data buffer holds " + std::to_string(data_num_bytes) +
              " bytes but the tensors cover only " + std::to_string(expected_begin) + "; " +
              std::to_string(data_num_bytes - expected_begin) +
              " trailing bytes are not part of any tensor (safetensors requires the tensors "
              "to cover the data buffer exactly)");
  }
}

// ---- writing ------------------------------------------------------------------------------

// The header JSON, keys in the order the reference writes them: "__metadata__" first, then the
// tensors in data order, each entry as {"dtype", "shape", "data_offsets"}.
std::string make_header_text(const std::filesystem::path& path, const NamedTensors& tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  size_t data_num_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) {
      throw InputError("cannot write safetensors file '" + path.string() +
                       "': a tensor may not be named \"__metadata__\" (the format reserves it)");
    }
    if (tensor.bytes.size() != tensor.num_bytes()) {
      throw InternalError("write_safetensors: tensor '" + name + "' holds " +
                          std::to_string(tensor.bytes.size()) + " bytes but its dtype and shape " +
                          shape_to_string(tensor.shape) + " need " +
                          std::to_string(tensor.num_bytes()));
    }
    nlohmann::ordered_json entry;
    entry["dtype"] = std::string(dtype_name(tensor.dtype));
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {data_num_bytes, data_num_bytes + tensor.num_bytes()};
    header[name] = std::move(entry);
    data_num_bytes += tensor.num_bytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::type_error& error) {
    throw InputError("cannot write safetensors file '" + path.string() +
                     "': a tensor name or metadata string is not valid UTF-8 (" + error.what() +
                     ")");
  }
  // Pad with spaces so that the data buffer starts 8-byte aligned, as the reference does.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderNumBytes) {
    throw InputError("cannot write safetensors file '" + path.string() + "': the header would be " +
                     std::to_string(text.size()) +
                     " bytes, above the 100000000-byte limit readers enforce; split the tensors "
                     "over several files");
  }
  return text;
}

}  // namespace

SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  BoundedReader file(path, kFormat);
  size_t header_num_bytes = read_header_num_bytes(file);
  json header = parse_header_json(file, header_num_bytes);
  size_t data_begin = kHeaderLengthNumBytes + header_num_bytes;
  size_t data_num_bytes = file.file_num_bytes() - data_begin;

  SafetensorsFile result;
  result.metadata = parse_metadata(file, header);
  std::vector<TensorEntry> entries;
  for (const auto& [name, json_entry] : header.items()) {
    if (name == kMetadataKey) continue;
    entries.push_back(parse_entry(file, name, json_entry, data_num_bytes));
  }
  check_layout(file, entries, data_num_bytes);

  // Only now, with every entry validated, touch the data.
  for (const TensorEntry& entry : entries) {
    HostTensor tensor;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    tensor.bytes.resize(entry.end - entry.begin);
    file.read_at(data_begin + entry.begin, tensor.bytes.data(), tensor.bytes.size());
    result.tensors.emplace(entry.name, std::move(tensor));
  }
  return result;
}

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header_text = make_header_text(path, tensors, metadata);
  std::string header_length;
  tensor_file::append_le(header_text.size(), kHeaderLengthNumBytes, header_length);
  tensor_file::write_file_atomically(path, kFormat, [&](std::ostream& out) {
    out.write(header_length.data(), static_cast<std::streamsize>(header_length.size()));
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (const auto& [name, tensor] : tensors) {
      out.write(reinterpret_cast<const char*>(tensor.bytes.data()),
                static_cast<std::streamsize>(tensor.bytes.size()));
    }
  });
}

}  // namespace parity
