#include "parity/interop/tf_events.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "parity/common/error.h"
#include "parity/interop/tfrecord.h"
#include "protobuf_wire.h"

namespace parity::interop {
namespace {

using wire::Field;
using wire::Reader;
using wire::Type;
using wire::WireError;

double bits_to_float(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

double bits_to_double(uint64_t bits) {
  double value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// IEEE binary16 to double, subnormals, infinities and NaN included.
double half_to_double(uint32_t bits) {
  const uint32_t sign = (bits >> 15) & 1u, exponent = (bits >> 10) & 0x1fu,
                 fraction = bits & 0x3ffu;
  double magnitude = 0;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), -24);
  } else if (exponent == 31) {
    magnitude = fraction == 0 ? HUGE_VAL : std::nan("");
  } else {
    magnitude = std::ldexp(static_cast<double>(fraction | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

// bfloat16 is a float32's upper half.
double bfloat16_to_double(uint32_t bits) { return bits_to_float((bits & 0xffffu) << 16); }

struct DtypeInfo {
  const char* name;
  size_t width;  // bytes per element in tensor_content
};

// tensorboard/compat/proto/types.proto: the numeric types a scalar can have.
std::optional<DtypeInfo> numeric_dtype(uint64_t dtype) {
  switch (dtype) {
    case 1:
      return DtypeInfo{"DT_FLOAT", 4};
    case 2:
      return DtypeInfo{"DT_DOUBLE", 8};
    case 3:
      return DtypeInfo{"DT_INT32", 4};
    case 9:
      return DtypeInfo{"DT_INT64", 8};
    case 14:
      return DtypeInfo{"DT_BFLOAT16", 2};
    case 19:
      return DtypeInfo{"DT_HALF", 2};
    default:
      return std::nullopt;
  }
}

// Element 0 of a raw little-endian tensor_content.
double first_of_content(std::string_view content, const DtypeInfo& dtype) {
  uint64_t bits = 0;
  for (size_t b = 0; b < dtype.width; ++b) {
    bits |= static_cast<uint64_t>(static_cast<unsigned char>(content[b])) << (8 * b);
  }
  const std::string name = dtype.name;
  if (name == "DT_FLOAT") return bits_to_float(static_cast<uint32_t>(bits));
  if (name == "DT_DOUBLE") return bits_to_double(bits);
  if (name == "DT_INT32") return static_cast<double>(static_cast<int32_t>(bits));
  if (name == "DT_INT64") return static_cast<double>(static_cast<int64_t>(bits));
  if (name == "DT_BFLOAT16") return bfloat16_to_double(static_cast<uint32_t>(bits));
  return half_to_double(static_cast<uint32_t>(bits));
}

// The first value of a repeated field, packed (one length-delimited run) or not.
std::optional<uint64_t> first_repeated(const Field& field, Type element, size_t base) {
  if (field.type == element) return field.integer;
  if (field.type != Type::kBytes || field.bytes.empty()) return std::nullopt;
  if (element == Type::kFixed32 || element == Type::kFixed64) {
    const size_t width = element == Type::kFixed32 ? 4 : 8;
    if (field.bytes.size() < width) throw WireError("a packed field shorter than one value");
    uint64_t bits = 0;
    for (size_t b = 0; b < width; ++b) {
      bits |= static_cast<uint64_t>(static_cast<unsigned char>(field.bytes[b])) << (8 * b);
    }
    return bits;
  }
  // Packed varints: decode the first as a one-field message of its own.
  const std::string message = std::string(1, '\x08') + std::string(field.bytes);
  Reader reader(message, base);
  Field first;
  reader.next(first);
  return first.integer;
}

// A TensorProto with one numeric element: its value and dtype name; nullopt for anything else
// (strings, histograms, images: not scalars).
std::optional<std::pair<double, std::string>> tensor_scalar(std::string_view tensor, size_t base) {
  Reader reader(tensor, base);
  Field field;
  std::optional<DtypeInfo> dtype;
  // One element when every dim's size is 1 (a product of the sizes could overflow, and two
  // unknown dims of -1 would multiply to 1).
  bool one_element = true;
  std::optional<std::string_view> content;
  // The first typed value: its field (float_val 5, double_val 6, int_val 7, int64_val 10,
  // half_val 13) and its bits.
  std::optional<std::pair<uint32_t, uint64_t>> first_typed;
  while (reader.next(field)) {
    switch (field.number) {
      case 1:
        dtype = numeric_dtype(field.integer);
        if (!dtype) return std::nullopt;
        break;
      case 2: {  // TensorShapeProto: dim = 2 { size = 1 }
        Reader shape(field.bytes, reader.offset_of(field.bytes));
        Field dim;
        while (shape.next(dim)) {
          if (dim.number != 2 || dim.type != Type::kBytes) continue;
          Reader size(dim.bytes, shape.offset_of(dim.bytes));
          Field size_field;
          while (size.next(size_field)) {
            if (size_field.number == 1 && size_field.integer != 1) one_element = false;
          }
        }
        break;
      }
      case 4:
        content = field.bytes;
        break;
      case 5:
      case 6:
      case 7:
      case 10:
      case 13: {
        const Type element = field.number == 5   ? Type::kFixed32
                             : field.number == 6 ? Type::kFixed64
                                                 : Type::kVarint;
        if (first_typed) break;
        if (auto bits = first_repeated(field, element, base)) first_typed = {field.number, *bits};
        break;
      }
      default:
        break;
    }
  }
  if (!dtype || !one_element) return std::nullopt;
  if (content) {
    if (content->size() != dtype->width) {
      throw WireError(fmt::format("a {} scalar tensor with {} content bytes (expected {})",
                                  dtype->name, content->size(), dtype->width));
    }
    return std::pair{first_of_content(*content, *dtype), std::string(dtype->name)};
  }
  if (!first_typed) return std::nullopt;
  const auto [number, bits] = *first_typed;
  const std::string name = dtype->name;
  double value = 0;
  if (number == 5) value = bits_to_float(static_cast<uint32_t>(bits));
  if (number == 6) value = bits_to_double(bits);
  if (number == 7) value = static_cast<double>(static_cast<int32_t>(bits));
  if (number == 10) value = static_cast<double>(static_cast<int64_t>(bits));
  // half_val holds DT_HALF and DT_BFLOAT16 values as their 16 bits.
  if (number == 13) {
    value = name == "DT_BFLOAT16" ? bfloat16_to_double(static_cast<uint32_t>(bits))
                                  : half_to_double(static_cast<uint32_t>(bits));
  }
  return std::pair{value, name};
}

void read_summary(std::string_view summary, size_t base, int64_t step, double wall_time,
                  EventFile& file) {
  Reader reader(summary, base);
  Field value_field;
  while (reader.next(value_field)) {
    if (value_field.number != 1 || value_field.type != Type::kBytes) continue;
    Reader value(value_field.bytes, reader.offset_of(value_field.bytes));
    Field field;
    std::string tag;
    std::optional<std::pair<double, std::string>> scalar;
    std::string encoding;
    bool other = false;
    while (value.next(field)) {
      if (field.number == 1) tag = std::string(field.bytes);
      if (field.number == 2 && field.type == Type::kFixed32) {
        scalar = std::pair{bits_to_float(static_cast<uint32_t>(field.integer)), "DT_FLOAT"};
        encoding = "simple_value";
      }
      if (field.number == 8 && field.type == Type::kBytes) {
        scalar = tensor_scalar(field.bytes, value.offset_of(field.bytes));
        encoding = "tensor";
        other = !scalar;
      }
      if (field.number >= 3 && field.number <= 6) other = true;
    }
    if (scalar) {
      file.scalars.push_back({tag, step, scalar->first, wall_time, encoding, scalar->second});
    } else if (other) {
      ++file.skipped_tags[tag];
    }
  }
}

const char* event_kind(uint32_t field) {
  switch (field) {
    case 3:
      return "file_version";
    case 4:
      return "graph_def";
    case 5:
      return "summary";
    case 6:
      return "log_message";
    case 7:
      return "session_log";
    case 8:
      return "tagged_run_metadata";
    case 9:
      return "meta_graph_def";
    case 10:
      return "source_metadata";
    default:
      return nullptr;
  }
}

}  // namespace

EventFile read_event_file(const std::filesystem::path& path) {
  EventFile file;
  for (const Record& record : read_tfrecords(path)) {
    ++file.records;
    try {
      Reader reader(record.data);
      Field field;
      int64_t step = 0;
      double wall_time = 0;
      std::optional<std::string_view> summary;
      size_t summary_at = 0;
      while (reader.next(field)) {
        if (field.number == 1 && field.type == Type::kFixed64)
          wall_time = bits_to_double(field.integer);
        if (field.number == 2 && field.type == Type::kVarint) {
          step = static_cast<int64_t>(field.integer);
        }
        if (const char* kind = event_kind(field.number)) ++file.event_kinds[kind];
        if (field.number == 3) file.file_version = std::string(field.bytes);
        if (field.number == 5 && field.type == Type::kBytes) {
          summary = field.bytes;
          summary_at = reader.offset_of(field.bytes);
        }
      }
      // Fields may come in any order: the step is known only once the whole Event is read.
      if (summary) read_summary(*summary, summary_at, step, wall_time, file);
    } catch (const WireError& error) {
      throw InputError(fmt::format("{}: record {} at byte {}: not a TensorBoard Event: {}",
                                   path.string(), file.records - 1, record.offset, error.what()));
    }
  }
  return file;
}

}  // namespace parity::interop
