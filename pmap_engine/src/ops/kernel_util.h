// Helpers shared by the CPU kernels of ops/*.cpp: dtype dispatch, element loading and storing,
// wrapping integer arithmetic and row-major index arithmetic; and the formatting of the
// primitives' error messages.
//
// Vocabulary:
//   element type  a struct naming how one dtype is held in a Buffer (`Storage`) and the C++
//                 type kernels compute in (`Compute`). bf16 and f16 are stored as 16-bit
//                 patterns and computed in f32: load converts up, store rounds to nearest even
//                 (as XLA's CPU backend does for every op on these types).
//   strides       per dimension, how many elements apart two neighbours along that dimension
//                 lie in a row-major buffer. A stride of 0 repeats one element along a
//                 dimension: that is how a broadcast input is read without copying it.
//
// Usage:
//   dispatch_float(dtype, [&](auto element) {
//     using E = decltype(element);
//     const auto* x = in.data<typename E::Storage>();
//     ... E::load(x[i]) ... E::store(value) ...
//   });
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/primitive.h"
#include "pmap_engine/array.h"
#include "pmap_engine/dtype.h"

namespace pmap_engine {

// --- element types ---

// A dtype computed in the type it is stored in: f32, f64, i32, u32.
template <typename T, DType Type>
struct PlainElement {
  using Storage = T;
  using Compute = T;
  static constexpr DType kDType = Type;
  static Compute load(Storage value) { return value; }
  static Storage store(Compute value) { return value; }
};
using F32Element = PlainElement<float, DType::f32>;
using F64Element = PlainElement<double, DType::f64>;
using I32Element = PlainElement<int32_t, DType::i32>;
using U32Element = PlainElement<uint32_t, DType::u32>;

// A 16-bit float, stored as its bit pattern and computed in f32 with the given conversions.
template <DType Type, float (*kToF32)(uint16_t), uint16_t (*kFromF32)(float)>
struct HalfFloatElement {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr DType kDType = Type;
  static Compute load(Storage bits) { return kToF32(bits); }
  static Storage store(Compute value) { return kFromF32(value); }
};
using Bf16Element = HalfFloatElement<DType::bf16, bf16_to_f32, f32_to_bf16>;
using F16Element = HalfFloatElement<DType::f16, f16_to_f32, f32_to_f16>;

// bool is one byte per element holding 0 or 1.
struct BoolElement {
  using Storage = uint8_t;
  using Compute = bool;
  static constexpr DType kDType = DType::bool_;
  static Compute load(Storage value) { return value != 0; }
  static Storage store(Compute value) { return value ? 1 : 0; }
};

// Raised when a kernel meets a dtype its abstract_eval should have refused: a bug, not misuse.
[[noreturn]] inline void unsupported_kernel_dtype(const char* dispatcher, DType dtype) {
  throw EngineError(std::string("internal error: ") + dispatcher + " got unsupported dtype " +
                    dtype_name(dtype) + " (the primitive's abstract_eval should refuse it)");
}

// --- dispatch: calls fn(ElementType{}) for the runtime dtype; returns what fn returns ---

// The engine of the dispatchers below: fn(E{}) for the element type E among Element, Rest...
// whose kDType is `dtype`; raises naming `dispatcher` when there is none.
template <typename Element, typename... Rest, typename Fn>
decltype(auto) dispatch_among(const char* dispatcher, DType dtype, Fn&& fn) {
  if (dtype == Element::kDType) return fn(Element{});
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_among<Rest...>(dispatcher, dtype, fn);
  } else {
    unsupported_kernel_dtype(dispatcher, dtype);
  }
}

// out[i] = block(in[i]) for an element type computed in f32, through an f32 block function
// (ops/xla_math.h): f32 data directly, bf16/f16 widened a chunk at a time and rounded back once.
template <typename E>
Buffer map_f32_block(const Buffer& x, void (*block)(const float*, float*, size_t)) {
  static_assert(std::is_same_v<typename E::Compute, float>, "an f32 block computes in f32");
  Buffer output = Buffer::allocate_uninitialized(x.dtype, x.shape);  // written in full
  const auto* in = x.data<typename E::Storage>();
  auto* out = output.data<typename E::Storage>();
  const size_t num_elements = x.num_elements();
  if constexpr (std::is_same_v<typename E::Storage, float>) {
    block(in, out, num_elements);
  } else {
    constexpr size_t kChunk = 256;
    float chunk[kChunk];
    for (size_t start = 0; start < num_elements; start += kChunk) {
      const size_t count = std::min(kChunk, num_elements - start);
      for (size_t i = 0; i < count; ++i) chunk[i] = E::load(in[start + i]);
      block(chunk, chunk, count);
      for (size_t i = 0; i < count; ++i) out[start + i] = E::store(chunk[i]);
    }
  }
  return output;
}

// f32, f64, bf16, f16.
template <typename Fn>
decltype(auto) dispatch_float(DType dtype, Fn&& fn) {
  return dispatch_among<F32Element, F64Element, Bf16Element, F16Element>("dispatch_float", dtype,
                                                                         fn);
}

// The floats, i32 and u32 (JAX's "_num" without complex): every dtype arithmetic accepts.
template <typename Fn>
decltype(auto) dispatch_numeric(DType dtype, Fn&& fn) {
  return dispatch_among<F32Element, F64Element, Bf16Element, F16Element, I32Element, U32Element>(
      "dispatch_numeric", dtype, fn);
}

// Every dtype, bool included.
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, Fn&& fn) {
  return dispatch_among<F32Element, F64Element, Bf16Element, F16Element, I32Element, U32Element,
                        BoolElement>("dispatch_all", dtype, fn);
}

// By element width only, for kernels that move elements without looking at them (broadcast,
// reshape, transpose, slice): calls fn(WidthTag<UIntN>{}) with an unsigned type of the dtype's
// size.
template <typename T>
struct WidthTag {
  using Storage = T;
};
template <typename Fn>
decltype(auto) dispatch_width(DType dtype, Fn&& fn) {
  switch (dtype_num_bytes(dtype)) {
    case 1: return fn(WidthTag<uint8_t>{});
    case 2: return fn(WidthTag<uint16_t>{});
    case 4: return fn(WidthTag<uint32_t>{});
    case 8: return fn(WidthTag<uint64_t>{});
    default: unsupported_kernel_dtype("dispatch_width", dtype);
  }
}

inline bool is_integer(DType dtype) { return dtype == DType::i32 || dtype == DType::u32; }

// Integer sums wrap around modulo 2^32, as XLA's do (no signed-overflow UB here).
template <typename Compute>
Compute wrapping_add(Compute a, Compute b) {
  if constexpr (std::is_integral_v<Compute>) {
    return static_cast<Compute>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  } else {
    return a + b;
  }
}

// --- error messages ---

// "f32[3,4]": an operand's type as JAX's messages print it.
inline std::string type_of(const ir::AbstractValue& value) {
  return type_to_string(value.dtype, value.shape);
}

// A Python tuple as JAX's messages print one: "(0, 2)", "(1,)", "()"; `separator` goes between
// elements.
inline std::string tuple_to_string(const std::vector<int64_t>& values,
                                   const char* separator = ", ") {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? separator : "") << values[i];
  out << (values.size() == 1 ? ",)" : ")");
  return out.str();
}

// --- index arithmetic ---

// Row-major strides of `shape`, in elements: the last dimension has stride 1.
inline std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// A negative axis counts from the end, as in NumPy. Raises naming the op when out of range.
inline int64_t normalize_axis(const char* op, int64_t axis, int64_t ndim) {
  if (axis < -ndim || axis >= ndim) {
    throw EngineError(std::string(op) + ": axis " + std::to_string(axis) +
                      " is out of bounds for an array of rank " + std::to_string(ndim) +
                      " (valid axes: -" + std::to_string(ndim) + " to " +
                      std::to_string(ndim - 1) + ")");
  }
  return axis < 0 ? axis + ndim : axis;
}

// A row-major shape seen as [outer, axis, inner] around one axis: element (o, k, i) lies at
// o * axis_size * num_inner + k * num_inner + i. Reductions, softmax, iota and concatenation
// along an axis are loops over this triple.
struct AxisSplit {
  size_t num_outer = 1;
  size_t axis_size = 1;
  size_t num_inner = 1;
  size_t offset(size_t outer, size_t k, size_t inner) const {
    return (outer * axis_size + k) * num_inner + inner;
  }
};

inline AxisSplit split_at_axis(const Shape& shape, int64_t axis) {
  AxisSplit split;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    size_t extent = static_cast<size_t>(shape[d]);
    if (d < axis) split.num_outer *= extent;
    else if (d == axis) split.axis_size = extent;
    else split.num_inner *= extent;
  }
  return split;
}

// Strides with which to read `input_shape` as if broadcast to `output_shape`: one stride per
// output dimension, 0 where the input is repeated (a dimension the input lacks, or one of
// size 1). broadcast_dimensions[i] is the output dimension that input dimension i maps to
// (lax.broadcast_in_dim's convention); the caller has validated it.
inline std::vector<int64_t> broadcast_strides(const Shape& input_shape, const Shape& output_shape,
                                              const std::vector<int64_t>& broadcast_dimensions) {
  std::vector<int64_t> input_strides = row_major_strides(input_shape);
  std::vector<int64_t> strides(output_shape.size(), 0);
  for (size_t i = 0; i < input_shape.size(); ++i) {
    if (input_shape[i] != 1) strides[static_cast<size_t>(broadcast_dimensions[i])] = input_strides[i];
  }
  return strides;
}

// The same for NumPy's rule, where the input's dimensions align with the output's last ones.
inline std::vector<int64_t> trailing_broadcast_strides(const Shape& input_shape,
                                                       const Shape& output_shape) {
  std::vector<int64_t> dims(input_shape.size());
  size_t lead = output_shape.size() - input_shape.size();
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(lead + i);
  return broadcast_strides(input_shape, output_shape, dims);
}

// Walks every element of `shape` in row-major order, calling
// fn(output_index, offsets) where offsets[k] is operand k's element offset under strides[k].
// Offsets advance incrementally (an odometer over the multi-index), so a step costs O(1)
// amortised instead of a division per dimension.
template <size_t kNumOperands, typename Fn>
void for_each_strided(const Shape& shape,
                      const std::array<std::vector<int64_t>, kNumOperands>& strides, Fn&& fn) {
  size_t num_elements = shape_num_elements(shape);
  std::vector<int64_t> index(shape.size(), 0);
  std::array<int64_t, kNumOperands> offsets{};
  for (size_t flat = 0; flat < num_elements; ++flat) {
    fn(flat, offsets);
    for (size_t d = shape.size(); d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < kNumOperands; ++k) offsets[k] += strides[k][d];
      if (index[d] < shape[d]) break;
      for (size_t k = 0; k < kNumOperands; ++k) offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace pmap_engine
