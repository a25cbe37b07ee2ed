// NumPy broadcasting, jnp dtype promotion and weak-typed scalars; see broadcasting.h.
#include "ops/broadcasting.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ops/kernel_util.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

std::string types_of(const std::vector<Array>& operands) {
  std::string text;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i > 0) text += " and ";
    text += type_to_string(operands[i].dtype(), operands[i].shape());
  }
  return text;
}

}  // namespace

void check_valid_operand(const char* op, const Array& x) {
  if (!x.valid()) {
    throw EngineError(std::string(op) +
                      ": operand is an empty Array() (default-constructed, holding no value); "
                      "pass an array made by an op or Array::from_floats");
  }
}

DType promote_types(const char* op, DType a, DType b) {
  if (a == b) return a;
  if (a == DType::bool_) return b;
  if (b == DType::bool_) return a;
  if (is_integer(a) && is_integer(b)) {
    throw EngineError(std::string(op) + ": no common dtype for " + dtype_name(a) + " and " +
                      dtype_name(b) +
                      " (JAX would promote to i64, which this engine does not have); convert "
                      "one operand with astype first");
  }
  if (is_integer(a)) return b;  // an integer meets a float: the float wins
  if (is_integer(b)) return a;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  // Two distinct floats among f32, bf16 and f16: f32 wins over either half type, and bf16
  // meets f16 at f32 too (neither holds the other's values).
  return DType::f32;
}

Shape broadcast_shapes(const char* op, const std::vector<Array>& operands) {
  size_t rank = 0;
  for (const Array& x : operands) {
    check_valid_operand(op, x);
    rank = std::max(rank, x.shape().size());
  }
  Shape result(rank, 1);
  for (const Array& x : operands) {
    const Shape& shape = x.shape();
    size_t lead = rank - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t& out = result[lead + i];
      if (shape[i] == out || shape[i] == 1) continue;
      if (out != 1) {
        throw EngineError(std::string(op) + ": incompatible shapes " + types_of(operands) +
                          " (NumPy broadcasting aligns trailing dimensions; each pair must be "
                          "equal or one of them 1)");
      }
      out = shape[i];
    }
  }
  return result;
}

Array weak_scalar(const char* op, const Array& array, double value) {
  check_valid_operand(op, array);
  DType dtype = array.dtype();
  if (is_floating(dtype)) return Array::scalar(value, dtype);
  bool integral = std::isfinite(value) && std::floor(value) == value;
  if (!integral) return Array::scalar(value, DType::f32);
  if (dtype == DType::bool_) dtype = DType::i32;
  double lowest = dtype == DType::i32 ? std::numeric_limits<int32_t>::min() : 0.0;
  double highest = dtype == DType::i32 ? std::numeric_limits<int32_t>::max()
                                       : std::numeric_limits<uint32_t>::max();
  if (value < lowest || value > highest) {
    throw EngineError(std::string(op) + ": Python scalar " + std::to_string(value) +
                      " is out of range for " + dtype_name(dtype) +
                      " (as jnp's OverflowError); convert the array with astype first");
  }
  return Array::scalar(value, dtype);
}

Array convert_if_needed(const Array& x, DType dtype) {
  return x.dtype() == dtype ? x : astype(x, dtype);
}

Array promote_rank(const Array& x, size_t rank) {
  size_t ndim = x.shape().size();
  if (ndim == 0 || ndim == rank) return x;  // 0-d operands broadcast inside the primitive
  size_t lead = rank - ndim;
  Shape shape(lead, 1);
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  std::vector<int64_t> dims(ndim);
  for (size_t i = 0; i < ndim; ++i) dims[i] = static_cast<int64_t>(lead + i);
  return broadcast_in_dim(x, shape, dims);
}

PromotedOperands promote_binary_operands(const char* op, const Array& lhs, const Array& rhs) {
  Shape shape = broadcast_shapes(op, {lhs, rhs});
  DType dtype = promote_types(op, lhs.dtype(), rhs.dtype());
  Array a = convert_if_needed(lhs, dtype);
  Array b = convert_if_needed(rhs, dtype);
  return {promote_rank(a, shape.size()), promote_rank(b, shape.size())};
}

// Like lax.py's _unbroadcast, extended to NumPy's trailing alignment so that callers may pass
// a cotangent of higher rank than the input.
Array unbroadcast(const Array& cotangent, const Shape& input_shape) {
  const Shape& shape = cotangent.shape();
  if (shape == input_shape) return cotangent;
  if (shape.size() < input_shape.size()) {
    throw EngineError("unbroadcast: cotangent " + type_to_string(cotangent.dtype(), shape) +
                      " has lower rank than the input shape " + shape_to_string(input_shape));
  }
  size_t lead = shape.size() - input_shape.size();
  std::vector<int64_t> summed_axes;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool input_lacks_dim = d < lead;
    if (!input_lacks_dim && input_shape[d - lead] == shape[d]) continue;
    if (!input_lacks_dim && input_shape[d - lead] != 1) {
      throw EngineError("unbroadcast: cotangent " + type_to_string(cotangent.dtype(), shape) +
                        " is not a broadcast of shape " + shape_to_string(input_shape));
    }
    summed_axes.push_back(static_cast<int64_t>(d));
  }
  // sum() with an empty axis list reduces everything, so only call it with work to do.
  Array summed = summed_axes.empty() ? cotangent : sum(cotangent, summed_axes, false);
  return summed.shape() == input_shape ? summed : reshape(summed, input_shape);
}

}  // namespace pmap_engine
