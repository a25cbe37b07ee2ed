// Just enough of the protobuf wire format (protobuf.dev/programming-guides/encoding) to read
// TensorBoard's Event messages without their .proto files: a message is a sequence of fields,
// each a varint key (field number << 3 | wire type) and a value of that type. Unknown fields are
// skipped, as every protobuf parser does. Errors throw WireError with the byte offset within
// the message; the caller adds the file and record.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace parity::interop::wire {

struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Type { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  Type type = Type::kVarint;
  uint64_t integer = 0;    // varint, fixed32 or fixed64 bits
  std::string_view bytes;  // length-delimited payload (a string, bytes, a message, packed values)
};

class Reader {
 public:
  explicit Reader(std::string_view message, size_t base_offset = 0)
      : data_(message), base_(base_offset) {}

  // The next field, or false at the end of the message.
  bool next(Field& field) {
    if (at_ == data_.size()) return false;
    // A field of one wire type must not show the previous field's value of another.
    field = Field{};
    const size_t start = at_;
    const uint64_t key = varint();
    field.number = static_cast<uint32_t>(key >> 3);
    const auto type = static_cast<uint32_t>(key & 7u);
    if (field.number == 0) fail(start, "field number 0");
    switch (type) {
      case 0:
        field.type = Type::kVarint;
        field.integer = varint();
        break;
      case 1:
        field.type = Type::kFixed64;
        field.integer = fixed(8);
        break;
      case 2: {
        field.type = Type::kBytes;
        const uint64_t length = varint();
        if (length > data_.size() - at_) {
          fail(start, "a length-delimited field runs past the end of its message");
        }
        field.bytes = data_.substr(at_, length);
        at_ += length;
        break;
      }
      case 5:
        field.type = Type::kFixed32;
        field.integer = fixed(4);
        break;
      default:
        fail(start, "wire type " + std::to_string(type) + " (groups or not protobuf)");
    }
    return true;
  }

  // Where a nested message's payload starts in the outer record, for error offsets.
  size_t offset_of(std::string_view payload) const {
    return base_ + static_cast<size_t>(payload.data() - data_.data());
  }

 private:
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ == data_.size()) fail(at_, "a varint runs past the end of its message");
      const auto byte = static_cast<unsigned char>(data_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7fu) << shift;
      if ((byte & 0x80u) == 0) return value;
    }
    fail(at_, "a varint longer than 10 bytes");
  }

  uint64_t fixed(int width) {
    if (data_.size() - at_ < static_cast<size_t>(width)) {
      fail(at_, "a fixed-width value runs past the end of its message");
    }
    uint64_t value = 0;
    for (int b = 0; b < width; ++b) {
      value |= static_cast<uint64_t>(static_cast<unsigned char>(data_[at_ + b])) << (8 * b);
    }
    at_ += static_cast<size_t>(width);
    return value;
  }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw WireError("byte " + std::to_string(base_ + at) + " of the record: " + what);
  }

  std::string_view data_;
  size_t base_ = 0;
  size_t at_ = 0;
};

}  // namespace parity::interop::wire
