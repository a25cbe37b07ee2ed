#include "parity/common/host_tensor.h"

#include <array>
#include <cstring>
#include <sstream>

#include "parity/common/error.h"

namespace parity {
namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t num_bytes;
};
constexpr std::array<DTypeInfo, 9> kDTypes = {{
    {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},
    {DType::I64, "I64", 8},
    {DType::U32, "U32", 4},
    {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  throw InternalError("unknown DType enumerator");
}
}  // namespace

size_t dtype_num_bytes(DType dtype) { return info(dtype).num_bytes; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

size_t shape_num_elements(const Shape& shape) {
  size_t count = 1;
  for (int64_t dim : shape) {
    PARITY_CHECK(dim >= 0);
    count *= static_cast<size_t>(dim);
  }
  return count;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out << ", ";
    out << shape[i];
  }
  if (shape.size() == 1) out << ",";
  out << ")";
  return out.str();
}

HostTensor HostTensor::zeros(DType dtype, Shape shape) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes.assign(tensor.num_bytes(), std::byte{0});
  return tensor;
}

HostTensor HostTensor::from_f32(Shape shape, const std::vector<float>& values) {
  HostTensor tensor = zeros(DType::F32, std::move(shape));
  PARITY_CHECK_EQ(values.size(), tensor.num_elements());
  // An empty vector's data() may be null, which memcpy must never get (UBSan), even for 0 bytes.
  if (tensor.num_bytes() > 0) std::memcpy(tensor.bytes.data(), values.data(), tensor.num_bytes());
  return tensor;
}

}  // namespace parity
