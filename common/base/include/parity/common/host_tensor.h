// HostTensor: a dense, row-major, host-memory tensor with a dtype and a shape. It is the
// exchange type of common/: tensor files, initial parameters and run directories use it, and
// both engines convert to and from it at their edges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parity {

enum class DType { F32, F64, F16, BF16, I32, I64, U32, U8, BOOL };

// Bytes of one element.
size_t dtype_num_bytes(DType dtype);
// The safetensors spelling: "F32", "BF16", "BOOL", ...
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for a name parity does not know.
std::optional<DType> dtype_from_name(std::string_view name);

using Shape = std::vector<int64_t>;

// Elements of a shape (1 for a scalar shape {}).
size_t shape_num_elements(const Shape& shape);
// "(784, 256)"; "()" for a scalar.
std::string shape_to_string(const Shape& shape);

struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<std::byte> bytes;  // row-major, little-endian, exactly num_bytes()

  size_t num_elements() const { return shape_num_elements(shape); }
  size_t num_bytes() const { return num_elements() * dtype_num_bytes(dtype); }

  // A zero-filled tensor.
  static HostTensor zeros(DType dtype, Shape shape);
  // A float32 tensor holding `values` (their count must match the shape).
  static HostTensor from_f32(Shape shape, const std::vector<float>& values);

  // Typed views of the bytes; the caller picks T to match dtype.
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

// Tensors by canonical name ("dense0.kernel"); std::map keeps files and digests in one order.
using NamedTensors = std::map<std::string, HostTensor>;

}  // namespace parity
