// Private helpers shared by the tensor file readers and writers (safetensors.cpp, npy.cpp):
// bounded reads from a file, checked size arithmetic, little-endian integers and the atomic
// write. Not part of parity_tensors' public interface.
#pragma once


#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "parity/common/error.h"
#include "parity/common/host_tensor.h"
#include "parity/common/output_path.h"

namespace parity::tensor_file {

constexpr std::array<DType, 9> kAllDTypes = {DType::F32,  DType::F64, DType::F16,
                                             DType::BF16, DType::I32, DType::I64,
                                             DType::U32,  DType::U8,  DType::BOOL};

// "F32, F64, F16, BF16, I32, I64, U32, U8, BOOL": for messages about an unknown dtype.
inline std::string known_dtype_names() {
  std::string names;
  for (DType dtype : kAllDTypes) {
    if (!names.empty()) names += ", ";
    names += dtype_name(dtype);
  }
  return names;
}

// a * b, or nullopt when the product does not fit in size_t.
inline std::optional<size_t> checked_mul(size_t a, size_t b) {
  if (a != 0 && b > std::numeric_limits<size_t>::max() / a) return std::nullopt;
  return a * b;
}

// Bytes a tensor of `shape` and `dtype` needs, or nullopt on overflow or a negative dim.
inline std::optional<size_t> checked_tensor_num_bytes(const Shape& shape, DType dtype) {
  std::optional<size_t> num_bytes = dtype_num_bytes(dtype);
  for (int64_t dim : shape) {
    if (dim < 0 || !num_bytes) return std::nullopt;
    num_bytes = checked_mul(*num_bytes, static_cast<size_t>(dim));
  }
  return num_bytes;
}

// Little-endian unsigned integer of `num_bytes` bytes (at most 8) starting at `bytes`.
inline uint64_t load_le(const unsigned char* bytes, size_t num_bytes) {
  uint64_t value = 0;
  for (size_t i = num_bytes; i > 0; --i) value = (value << 8) | bytes[i - 1];
  return value;
}

// Appends `value` as a little-endian integer of `num_bytes` bytes to `out`.
inline void append_le(uint64_t value, size_t num_bytes, std::string& out) {
  for (size_t i = 0; i < num_bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// A file (or a file's bytes already in memory, such as an .npz member) opened for bounded
// reads: every read is checked against the size the source had when it was opened, so a
// damaged length field can never make us read past the end.
class BoundedReader {
 public:
  // `format` names the source kind in messages ("safetensors file").
  BoundedReader(const std::filesystem::path& path, std::string format)
      : origin_("'" + path.string() + "'"), format_(std::move(format)) {
    std::error_code error;
    num_bytes_ = static_cast<size_t>(std::filesystem::file_size(path, error));
    if (error) fail("cannot read it: " + error.message());
    stream_.open(path, std::ios::binary);
    if (!stream_) fail(std::string("cannot open it for reading: ") + std::strerror(errno));
  }
  // Reads `bytes`, which must outlive the reader; `origin` names them in messages
  // ("'weights.npz' member 'dense0.npy'").
  BoundedReader(std::string origin, std::string format, std::string_view bytes)
      : origin_(std::move(origin)), format_(std::move(format)), memory_(bytes),
        num_bytes_(bytes.size()) {}

  size_t file_num_bytes() const { return num_bytes_; }

  // Reads [offset, offset + num_bytes) into `out`; the caller has checked the range, so a
  // range past the end here means the file shrank while we read it.
  void read_at(size_t offset, void* out, size_t num_bytes) {
    if (num_bytes == 0) return;
    if (offset > num_bytes_ || num_bytes > num_bytes_ - offset) {
      fail("read of " + std::to_string(num_bytes) + " bytes at offset " + std::to_string(offset) +
           " is past the end of the file (" + std::to_string(num_bytes_) + " bytes)");
    }
    if (!stream_.is_open()) {
      std::memcpy(out, memory_.data() + offset, num_bytes);
      return;
    }
    stream_.seekg(static_cast<std::streamoff>(offset));
    stream_.read(static_cast<char*>(out), static_cast<std::streamsize>(num_bytes));
    if (!stream_) {
      fail("short read of " + std::to_string(num_bytes) + " bytes at offset " +
           std::to_string(offset) + " (was the file changed while parity read it?)");
    }
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(format_ + " " + origin_ + ": " + problem);
  }

 private:
  std::string origin_;
  std::string format_;
  std::string_view memory_;
  size_t num_bytes_ = 0;
  std::ifstream stream_;
};

// Writes a file atomically, links not followed (write_output_file): a reader never sees a
// half-written file and a failed write leaves any old file in place.
inline void write_file_atomically(const std::filesystem::path& path, const std::string& format,
                                  const std::function<void(std::ostream&)>& write_content) {
  std::ostringstream contents;
  write_content(contents);
  write_output_file(path, contents.str(), format);
}

}  // namespace parity::tensor_file
