// Shape ops that move elements without arithmetic: transpose, concatenate, slice, pad, and the
// gather/scatter pair take_along_axis / scatter_add.
//
// Vocabulary. Every kernel here except the gather/scatter pair is one *strided copy*: walk the
// coordinates of a *region* (a shape) in row-major order and copy the element at
//   source.offset + sum(coord[d] * source.strides[d])
// to
//   destination.offset + sum(coord[d] * destination.strides[d]),
// strides counted in elements. transpose permutes the source strides; slice starts the source
// at the first kept element; pad starts the destination at the low padding; concatenate copies
// each operand into the output at its offset along the concatenated dimension.
//
// take_along_axis (jnp.take_along_axis, a gather in JAX) reads x at `indices` along one axis:
//   x: [..., N, ...], indices: [..., M, ...] -> out: [..., M, ...]
//   out[..., j, ...] = x[..., indices[..., j, ...], ...]
// Index semantics follow jax/_src/numpy/indexing.py take_along_axis with its default mode
// "fill": a negative index is wrapped once (i + N, _normalize_index), and an index still out of
// [0, N) reads the fill value: NaN for floats, the minimum for i32, the maximum for u32, true for
// bool (jax/_src/lax/slicing.py gather, FILL_OR_DROP). scatter_add is its transpose:
//   scatter_add(operand [..., N, ...], indices [..., M, ...], updates [..., M, ...])
//     = operand with updates[..., j, ...] added at [..., indices[..., j, ...], ...],
// where out-of-range updates are dropped (the "drop" half of FILL_OR_DROP).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "ops/broadcasting.h"
#include "ops/kernel_util.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

// One side of a strided copy: where the region's first element lies and how far each
// coordinate step moves, in elements.
struct StridedView {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// Element by element as T, an unsigned integer of the element's size (dispatch_width: bits
// copied as they are): a copy the compiler inlines, row by row along the region's last dimension.
template <typename T>
void strided_copy_as(const Shape& region, const T* source, const StridedView& from, T* destination,
                     const StridedView& to) {
  if (region.empty()) {
    destination[to.offset] = source[from.offset];
    return;
  }
  const int64_t row = region.back();
  const int64_t from_step = from.strides.back();
  const int64_t to_step = to.strides.back();
  const Shape rows(region.begin(), region.end() - 1);
  const std::array<std::vector<int64_t>, 2> row_strides = {
      std::vector<int64_t>(from.strides.begin(), from.strides.end() - 1),
      std::vector<int64_t>(to.strides.begin(), to.strides.end() - 1)};
  for_each_strided<2>(rows, row_strides, [&](size_t, const std::array<int64_t, 2>& offsets) {
    const T* in = source + from.offset + offsets[0];
    T* out = destination + to.offset + offsets[1];
    for (int64_t i = 0; i < row; ++i) out[i * to_step] = in[i * from_step];
  });
}

void strided_copy(const Shape& region, const std::byte* source_bytes, const StridedView& source,
                  std::byte* destination_bytes, const StridedView& destination, DType dtype) {
  dispatch_width(dtype, [&](auto width) {
    using T = typename decltype(width)::Storage;
    strided_copy_as(region, reinterpret_cast<const T*>(source_bytes), source,
                    reinterpret_cast<T*>(destination_bytes), destination);
  });
}

StridedView whole(const Shape& shape) { return {0, row_major_strides(shape)}; }

// --- transpose[permutation] ---

bool is_permutation(const std::vector<int64_t>& permutation, size_t ndim) {
  if (permutation.size() != ndim) return false;
  std::vector<bool> seen(ndim, false);
  for (int64_t axis : permutation) {
    if (axis < 0 || axis >= static_cast<int64_t>(ndim) || seen[static_cast<size_t>(axis)]) {
      return false;
    }
    seen[static_cast<size_t>(axis)] = true;
  }
  return true;
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& permutation) {
  std::vector<int64_t> inverse(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i) {
    inverse[static_cast<size_t>(permutation[i])] = static_cast<int64_t>(i);
  }
  return inverse;
}

// x: [d_0, ..., d_n-1] -> out: [d_perm[0], ..., d_perm[n-1]]
Buffer transpose_kernel(const Buffer& x, const std::vector<int64_t>& permutation) {
  Shape out_shape;
  for (int64_t axis : permutation) out_shape.push_back(x.shape[static_cast<size_t>(axis)]);
  Buffer out = Buffer::allocate_uninitialized(x.dtype, out_shape);  // written in full
  const std::vector<int64_t> x_strides = row_major_strides(x.shape);
  StridedView source;
  for (int64_t axis : permutation) source.strides.push_back(x_strides[static_cast<size_t>(axis)]);
  strided_copy(out_shape, x.bytes->data(), source, out.bytes->data(), whole(out_shape),
               x.dtype);
  return out;
}

const ir::Primitive* kTranspose = ir::register_primitive({
    "transpose",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      const ir::AbstractValue& x = inputs.at(0);
      const std::vector<int64_t>& permutation = params.ints("permutation");
      if (!is_permutation(permutation, x.shape.size())) {
        throw EngineError("transpose: permutation " + tuple_to_string(permutation) +
                          " isn't a permutation of the operand dimensions of " +
                          type_to_string(x.dtype, x.shape));
      }
      Shape out_shape;
      for (int64_t axis : permutation) out_shape.push_back(x.shape[static_cast<size_t>(axis)]);
      return std::vector<ir::AbstractValue>{{x.dtype, out_shape}};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{transpose_kernel(*inputs[0], params.ints("permutation"))};
    },
    // ct: [d_perm[0], ...] -> x: [d_0, ...] by the inverse permutation.
    [](const ir::VjpArgs& args) {
      return std::vector<Array>{transpose(args.output_cotangents[0],
                                          inverse_permutation(args.params.ints("permutation")))};
    },
});

// --- concatenate[dimension] ---

// operands: [.., n_i, ..] (equal elsewhere) -> out: [.., sum n_i, ..]
Buffer concatenate_kernel(const std::vector<const Buffer*>& operands, int64_t dimension) {
  Shape out_shape = operands.front()->shape;
  out_shape[static_cast<size_t>(dimension)] = 0;
  for (const Buffer* operand : operands) {
    out_shape[static_cast<size_t>(dimension)] += operand->shape[static_cast<size_t>(dimension)];
  }
  Buffer out = Buffer::allocate_uninitialized(operands.front()->dtype, out_shape);  // in full
  StridedView destination = whole(out_shape);
  for (const Buffer* operand : operands) {
    strided_copy(operand->shape, operand->bytes->data(), whole(operand->shape), out.bytes->data(),
                 destination, out.dtype);
    destination.offset += operand->shape[static_cast<size_t>(dimension)] *
                          destination.strides[static_cast<size_t>(dimension)];
  }
  return out;
}

std::string types_to_string(const std::vector<ir::AbstractValue>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    text += (i ? ", " : "") + type_to_string(values[i].dtype, values[i].shape);
  }
  return text;
}

ir::AbstractValue concatenate_abstract_eval(const std::vector<ir::AbstractValue>& operands,
                                            int64_t dimension) {
  if (operands.empty()) throw EngineError("concatenate: needs at least one array");
  const ir::AbstractValue& first = operands.front();
  const int64_t ndim = static_cast<int64_t>(first.shape.size());
  if (dimension < 0 || dimension >= ndim) {
    throw EngineError("concatenate: dimension " + std::to_string(dimension) +
                      " is out of bounds for operands " + types_to_string(operands));
  }
  Shape out_shape = first.shape;
  out_shape[static_cast<size_t>(dimension)] = 0;
  for (const ir::AbstractValue& operand : operands) {
    if (operand.dtype != first.dtype) {
      throw EngineError("concatenate: arguments must have the same dtypes, got " +
                        types_to_string(operands) + " (convert with astype first)");
    }
    if (operand.shape.size() != first.shape.size()) {
      throw EngineError(
          "concatenate: cannot concatenate arrays with different numbers of "
          "dimensions: got " +
          types_to_string(operands));
    }
    for (int64_t d = 0; d < ndim; ++d) {
      if (d != dimension &&
          operand.shape[static_cast<size_t>(d)] != first.shape[static_cast<size_t>(d)]) {
        throw EngineError(
            "concatenate: cannot concatenate arrays with shapes that differ in "
            "dimensions other than the one being concatenated: concatenating "
            "along dimension " +
            std::to_string(dimension) + " for " + types_to_string(operands));
      }
    }
    out_shape[static_cast<size_t>(dimension)] += operand.shape[static_cast<size_t>(dimension)];
  }
  return {first.dtype, out_shape};
}

// lax.py _concatenate_transpose_rule: each operand gets its slice of the cotangent.
// ct: [.., sum n_i, ..] -> operand i: [.., n_i, ..]
std::vector<Array> concatenate_vjp(const ir::VjpArgs& args) {
  const Array& ct = args.output_cotangents[0];
  const size_t dimension = static_cast<size_t>(args.params.integer("dimension"));
  std::vector<Array> cotangents;
  std::vector<int64_t> start(ct.shape().size(), 0);
  for (const Array& operand : args.inputs) {
    std::vector<int64_t> limit = ct.shape();
    limit[dimension] = start[dimension] + operand.shape()[dimension];
    cotangents.push_back(slice(ct, start, limit));
    start[dimension] = limit[dimension];
  }
  return cotangents;
}

const ir::Primitive* kConcatenate = ir::register_primitive({
    "concatenate",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return std::vector<ir::AbstractValue>{
          concatenate_abstract_eval(inputs, params.integer("dimension"))};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{concatenate_kernel(inputs, params.integer("dimension"))};
    },
    concatenate_vjp,
});

// --- pad[padding_low, padding_high]: zero padding, the transpose of slice ---
// (lax.pad with padding_value 0 and no interior padding; lax.py _slice_transpose_rule.)

Shape padded_shape(const Shape& shape, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high) {
  Shape out = shape;
  for (size_t d = 0; d < shape.size(); ++d) out[d] += low[d] + high[d];
  return out;
}

// x: [d_i] -> out: [low_i + d_i + high_i], zeros around x.
Buffer pad_kernel(const Buffer& x, const std::vector<int64_t>& low,
                  const std::vector<int64_t>& high) {
  Buffer out = Buffer::allocate(x.dtype, padded_shape(x.shape, low, high));  // zero-filled
  StridedView destination = whole(out.shape);
  for (size_t d = 0; d < low.size(); ++d) destination.offset += low[d] * destination.strides[d];
  strided_copy(x.shape, x.bytes->data(), whole(x.shape), out.bytes->data(), destination,
               x.dtype);
  return out;
}

const ir::Primitive* kPad = ir::register_primitive({
    "pad",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      const ir::AbstractValue& x = inputs.at(0);
      const std::vector<int64_t>& low = params.ints("padding_low");
      const std::vector<int64_t>& high = params.ints("padding_high");
      bool valid = low.size() == x.shape.size() && high.size() == x.shape.size();
      for (size_t d = 0; valid && d < low.size(); ++d) valid = low[d] >= 0 && high[d] >= 0;
      if (!valid) {
        throw EngineError("pad: padding_low " + tuple_to_string(low) + " and padding_high " +
                          tuple_to_string(high) + " must be non-negative, one per dimension of " +
                          type_to_string(x.dtype, x.shape));
      }
      return std::vector<ir::AbstractValue>{{x.dtype, padded_shape(x.shape, low, high)}};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{
          pad_kernel(*inputs[0], params.ints("padding_low"), params.ints("padding_high"))};
    },
    // ct: [low + d + high] -> x: [d], the interior of the cotangent.
    [](const ir::VjpArgs& args) {
      const std::vector<int64_t>& low = args.params.ints("padding_low");
      std::vector<int64_t> limit = low;
      for (size_t d = 0; d < limit.size(); ++d) limit[d] += args.inputs[0].shape()[d];
      return std::vector<Array>{slice(args.output_cotangents[0], low, limit)};
    },
});

Array pad_with_zeros(const Array& x, const std::vector<int64_t>& low,
                     const std::vector<int64_t>& high) {
  return ir::bind1(*kPad, {x}, {{"padding_low", low}, {"padding_high", high}});
}

// --- slice[start_indices, limit_indices] (unit strides) ---

// lax.py _slice_shape_rule's checks, with the operand's type in the message.
Shape sliced_shape(DType dtype, const Shape& shape, const std::vector<int64_t>& start,
                   const std::vector<int64_t>& limit) {
  const std::string operand = " for operand " + type_to_string(dtype, shape);
  if (start.size() != shape.size() || limit.size() != shape.size()) {
    throw EngineError("slice: start_indices " + tuple_to_string(start) + " and limit_indices " +
                      tuple_to_string(limit) + " must have one entry per dimension of the operand" +
                      operand);
  }
  Shape out(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (start[d] < 0) {
      throw EngineError(
          "slice: start_indices must be greater than or equal to zero, got "
          "start_indices of " +
          tuple_to_string(start) + operand);
    }
    if (limit[d] > shape[d]) {
      throw EngineError(
          "slice: limit_indices must be less than or equal to operand shape, got "
          "limit_indices " +
          tuple_to_string(limit) + operand);
    }
    if (limit[d] < start[d]) {
      throw EngineError(
          "slice: limit_indices must be greater than or equal to start_indices, "
          "got start_indices " +
          tuple_to_string(start) + " and limit_indices " + tuple_to_string(limit) + operand);
    }
    out[d] = limit[d] - start[d];
  }
  return out;
}

// x: [d_i] -> out: [limit_i - start_i]
Buffer slice_kernel(const Buffer& x, const std::vector<int64_t>& start,
                    const std::vector<int64_t>& limit) {
  Buffer out = Buffer::allocate_uninitialized(x.dtype, sliced_shape(x.dtype, x.shape, start, limit));
  StridedView source = whole(x.shape);
  for (size_t d = 0; d < start.size(); ++d) source.offset += start[d] * source.strides[d];
  strided_copy(out.shape, x.bytes->data(), source, out.bytes->data(), whole(out.shape),
               x.dtype);
  return out;
}

const ir::Primitive* kSlice = ir::register_primitive({
    "slice",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      const ir::AbstractValue& x = inputs.at(0);
      return std::vector<ir::AbstractValue>{
          {x.dtype, sliced_shape(x.dtype, x.shape, params.ints("start_indices"),
                                 params.ints("limit_indices"))}};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{
          slice_kernel(*inputs[0], params.ints("start_indices"), params.ints("limit_indices"))};
    },
    // lax.py _slice_transpose_rule: zero-pad the cotangent back to x's shape.
    // ct: [limit - start] -> x: [d]
    [](const ir::VjpArgs& args) {
      const Shape& x_shape = args.inputs[0].shape();
      const std::vector<int64_t>& start = args.params.ints("start_indices");
      const std::vector<int64_t>& limit = args.params.ints("limit_indices");
      std::vector<int64_t> high(x_shape.size());
      for (size_t d = 0; d < x_shape.size(); ++d) high[d] = x_shape[d] - limit[d];
      return std::vector<Array>{pad_with_zeros(args.output_cotangents[0], start, high)};
    },
});

// --- dynamic_slice[slice_sizes] ---
//
// lax.dynamic_slice(x, starts, slice_sizes), with one i32 scalar start per dimension. A start
// is clamped into [0, size - slice_size], as XLA's DynamicSlice clamps (XLA operation
// semantics). The SPMD partitioner emits it to cut a device's block out of a whole value, its
// starts computed from axis_index, as XLA's partitioner cuts with partition-id. It runs after
// autodiff, so it has no VJP here.
const ir::Primitive* kDynamicSlice = ir::register_primitive({
    "dynamic_slice",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      const ir::AbstractValue& x = inputs.at(0);
      const std::vector<int64_t>& sizes = params.ints("slice_sizes");
      if (inputs.size() != x.shape.size() + 1 || sizes.size() != x.shape.size()) {
        throw EngineError("dynamic_slice: needs one start index and one slice size per "
                          "dimension of " + shape_to_string(x.shape));
      }
      return std::vector<ir::AbstractValue>{
          {x.dtype, sliced_shape(x.dtype, x.shape, std::vector<int64_t>(sizes.size(), 0), sizes)}};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      const Buffer& x = *inputs[0];
      const std::vector<int64_t>& sizes = params.ints("slice_sizes");
      std::vector<int64_t> start(sizes.size()), limit(sizes.size());
      for (size_t d = 0; d < sizes.size(); ++d) {
        const int64_t wanted = inputs[d + 1]->data<int32_t>()[0];
        start[d] = std::clamp<int64_t>(wanted, 0, x.shape[d] - sizes[d]);
        limit[d] = start[d] + sizes[d];
      }
      return std::vector<Buffer>{slice_kernel(x, start, limit)};
    },
    nullptr,
});

// --- take_along_axis[axis (fill_value)] and scatter_add[axis] ---

// The fill value of jnp's "fill" mode for a dtype (slicing.py gather).
double default_fill_value(DType dtype) {
  switch (dtype) {
    case DType::i32:
      return static_cast<double>(std::numeric_limits<int32_t>::min());
    case DType::u32:
      return static_cast<double>(std::numeric_limits<uint32_t>::max());
    case DType::bool_:
      return 1.0;
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// Checks the pairing of an operand [.., N, ..] with indices [.., M, ..]: same rank, integer
// indices, equal sizes off the axis (the jnp-level op broadcasts before binding).
void check_along_axis(const char* op, const ir::AbstractValue& operand,
                      const ir::AbstractValue& indices, int64_t axis) {
  const std::string types = type_to_string(operand.dtype, operand.shape) + " and indices " +
                            type_to_string(indices.dtype, indices.shape);
  if (!is_integer(indices.dtype)) {
    throw EngineError(std::string(op) + ": indices must be of integer type (i32 or u32), got " +
                      types);
  }
  if (operand.shape.size() != indices.shape.size()) {
    throw EngineError(std::string(op) +
                      ": indices and arr must have the same number of "
                      "dimensions, got " +
                      types);
  }
  const int64_t ndim = static_cast<int64_t>(operand.shape.size());
  if (axis < 0 || axis >= ndim) {
    throw EngineError(std::string(op) + ": axis " + std::to_string(axis) +
                      " is out of bounds for " + types);
  }
  for (int64_t d = 0; d < ndim; ++d) {
    if (d != axis &&
        operand.shape[static_cast<size_t>(d)] != indices.shape[static_cast<size_t>(d)]) {
      throw EngineError(std::string(op) + ": shapes must agree off axis " + std::to_string(axis) +
                        ", got " + types + " (dimension " + std::to_string(d) + ")");
    }
  }
}

// Where an element of `indices` points along the axis: its position there, or -1 when it is
// out of range after wrapping a negative index once.
struct AxisLookup {
  const Buffer& indices;
  int64_t axis_num_elements;

  int64_t position(size_t flat_index) const {
    int64_t index = indices.dtype == DType::i32
                        ? static_cast<int64_t>(indices.data<int32_t>()[flat_index])
                        : static_cast<int64_t>(indices.data<uint32_t>()[flat_index]);
    if (index < 0) index += axis_num_elements;
    return (index >= 0 && index < axis_num_elements) ? index : -1;
  }
};

// Strides that walk an operand [.., N, ..] along with indices [.., M, ..]: the operand's own
// strides off the axis and 0 on it, so the walk lands on the axis' first element; the
// looked-up position times the axis stride is added per element.
std::vector<int64_t> off_axis_strides(const Shape& operand_shape, size_t axis) {
  std::vector<int64_t> strides = row_major_strides(operand_shape);
  strides[axis] = 0;
  return strides;
}

// One element of `dtype` holding `value` (a NaN, an integer limit, or 0), as raw bytes.
std::vector<std::byte> element_bytes(DType dtype, double value) {
  std::vector<std::byte> bytes(dtype_num_bytes(dtype));
  dispatch_all(dtype, [&](auto element) {
    using Element = decltype(element);
    typename Element::Storage stored =
        Element::store(static_cast<typename Element::Compute>(value));
    std::memcpy(bytes.data(), &stored, sizeof stored);
  });
  return bytes;
}

// x: [.., N, ..], indices: [.., M, ..] -> out: [.., M, ..]
Buffer take_along_axis_kernel(const Buffer& x, const Buffer& indices, int64_t axis,
                              double fill_value) {
  Buffer out = Buffer::allocate_uninitialized(x.dtype, indices.shape);  // every element: a value or the fill
  const size_t element_num_bytes = dtype_num_bytes(x.dtype);
  const std::vector<std::byte> fill = element_bytes(x.dtype, fill_value);
  const int64_t axis_stride = row_major_strides(x.shape)[static_cast<size_t>(axis)];
  const AxisLookup lookup{indices, x.shape[static_cast<size_t>(axis)]};
  for_each_strided<1>(
      indices.shape, {off_axis_strides(x.shape, static_cast<size_t>(axis))},
      [&](size_t flat_index, const std::array<int64_t, 1>& row_start) {
        const int64_t position = lookup.position(flat_index);
        const std::byte* source =
            position < 0
                ? fill.data()
                : x.bytes->data() + static_cast<size_t>(row_start[0] + position * axis_stride) *
                                        element_num_bytes;
        std::memcpy(out.bytes->data() + flat_index * element_num_bytes, source, element_num_bytes);
      });
  return out;
}

// operand: [.., N, ..], indices/updates: [.., M, ..] -> out: [.., N, ..]. Accumulates in the
// compute type (f32 for bf16/f16) and rounds once; updates land in row-major order.
Buffer scatter_add_kernel(const Buffer& operand, const Buffer& indices, const Buffer& updates,
                          int64_t axis) {
  return dispatch_numeric(operand.dtype, [&](auto element) {
    using Element = decltype(element);
    using Compute = typename Element::Compute;
    using Storage = typename Element::Storage;
    const Storage* operand_values = operand.data<Storage>();
    const Storage* update_values = updates.data<Storage>();
    std::vector<Compute> sums(operand.num_elements());
    for (size_t i = 0; i < sums.size(); ++i) sums[i] = Element::load(operand_values[i]);
    const int64_t axis_stride = row_major_strides(operand.shape)[static_cast<size_t>(axis)];
    const AxisLookup lookup{indices, operand.shape[static_cast<size_t>(axis)]};
    for_each_strided<1>(indices.shape, {off_axis_strides(operand.shape, static_cast<size_t>(axis))},
                        [&](size_t flat_index, const std::array<int64_t, 1>& row_start) {
                          const int64_t position = lookup.position(flat_index);
                          if (position < 0) return;  // dropped
                          Compute& sum_at =
                              sums[static_cast<size_t>(row_start[0] + position * axis_stride)];
                          sum_at = wrapping_add(sum_at, Element::load(update_values[flat_index]));
                        });
    Buffer out = Buffer::allocate_uninitialized(operand.dtype, operand.shape);  // in full
    Storage* out_values = out.data<Storage>();
    for (size_t i = 0; i < sums.size(); ++i) out_values[i] = Element::store(sums[i]);
    return out;
  });
}

// Bind the two primitives below; each one's VJP uses the other.
Array gather_along_axis(const Array& x, const Array& indices, int64_t axis,
                        std::optional<double> fill_value);
Array scatter_add_along_axis(const Array& operand, const Array& indices, const Array& updates,
                             int64_t axis);

// jnp.take_along_axis's gradient (lax gather transpose): scatter the cotangent back.
// x: [.., N, ..], ct: [.., M, ..] -> x_ct: [.., N, ..]; indices get none.
std::vector<Array> take_along_axis_vjp(const ir::VjpArgs& args) {
  const Array& x = args.inputs[0];
  const Array& indices = args.inputs[1];
  return {scatter_add_along_axis(zeros_like(x), indices, args.output_cotangents[0],
                                 args.params.integer("axis")),
          Array()};
}

const ir::Primitive* kTakeAlongAxis = ir::register_primitive({
    "take_along_axis",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      check_along_axis("take_along_axis", inputs.at(0), inputs.at(1), params.integer("axis"));
      return std::vector<ir::AbstractValue>{{inputs[0].dtype, inputs[1].shape}};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      const double fill_value = params.has("fill_value") ? params.real("fill_value")
                                                         : default_fill_value(inputs[0]->dtype);
      return std::vector<Buffer>{
          take_along_axis_kernel(*inputs[0], *inputs[1], params.integer("axis"), fill_value)};
    },
    take_along_axis_vjp,
});

// scatter_add's transpose (lax slicing.py _scatter_add_transpose_rule): the operand passes the
// cotangent through; the updates gather it, reading 0 where their update was dropped.
// ct: [.., N, ..] -> operand: [.., N, ..], updates: [.., M, ..]; indices get none.
std::vector<Array> scatter_add_vjp(const ir::VjpArgs& args) {
  const Array& ct = args.output_cotangents[0];
  const int64_t axis = args.params.integer("axis");
  return {ct, Array(), gather_along_axis(ct, args.inputs[1], axis, 0.0)};
}

const ir::Primitive* kScatterAdd = ir::register_primitive({
    "scatter_add",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      const ir::AbstractValue& operand = inputs.at(0);
      const ir::AbstractValue& updates = inputs.at(2);
      check_along_axis("scatter_add", operand, inputs.at(1), params.integer("axis"));
      if (updates.dtype != operand.dtype || updates.shape != inputs[1].shape ||
          operand.dtype == DType::bool_) {
        throw EngineError(
            "scatter_add: updates must be numeric, of the operand's dtype and the "
            "indices' shape, got operand " +
            type_to_string(operand.dtype, operand.shape) + ", indices " +
            type_to_string(inputs[1].dtype, inputs[1].shape) + ", updates " +
            type_to_string(updates.dtype, updates.shape));
      }
      return std::vector<ir::AbstractValue>{operand};
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      return std::vector<Buffer>{
          scatter_add_kernel(*inputs[0], *inputs[1], *inputs[2], params.integer("axis"))};
    },
    scatter_add_vjp,
});

Array gather_along_axis(const Array& x, const Array& indices, int64_t axis,
                        std::optional<double> fill_value) {
  ir::Params params{{"axis", axis}};
  if (fill_value) params.set("fill_value", *fill_value);
  return ir::bind1(*kTakeAlongAxis, {x, indices}, params);
}

Array scatter_add_along_axis(const Array& operand, const Array& indices, const Array& updates,
                             int64_t axis) {
  return ir::bind1(*kScatterAdd, {operand, indices, updates}, {{"axis", axis}});
}

int64_t canonical_axis(const char* op, int64_t axis, const Array& x) {
  const int64_t ndim = x.ndim();
  if (axis < -ndim || axis >= ndim) {
    throw EngineError(std::string(op) + ": axis " + std::to_string(axis) +
                      " is out of bounds for array of dimension " + std::to_string(ndim) + " (" +
                      type_to_string(x.dtype(), x.shape()) + ")");
  }
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace

// jnp.transpose: permutation entries may be negative; empty = reverse the axes. The identity
// permutation returns x itself, as lax.transpose does.
Array transpose(const Array& x, std::vector<int64_t> permutation) {
  const int64_t ndim = x.ndim();
  if (permutation.empty()) {
    for (int64_t d = ndim; d-- > 0;) permutation.push_back(d);
  }
  for (int64_t& axis : permutation) {
    if (axis < 0 && axis >= -ndim) axis += ndim;
  }
  std::vector<int64_t> identity(static_cast<size_t>(ndim));
  std::iota(identity.begin(), identity.end(), 0);
  if (permutation == identity) return x;
  return ir::bind1(*kTranspose, {x}, {{"permutation", permutation}});
}

// jnp.concatenate: negative axes count from the end; 0-d arrays cannot be concatenated; dtypes
// are promoted as jnp does.
Array concatenate(const std::vector<Array>& arrays, int64_t axis) {
  if (arrays.empty()) throw EngineError("concatenate: needs at least one array to concatenate");
  if (arrays.front().ndim() == 0) {
    throw EngineError("concatenate: zero-dimensional arrays cannot be concatenated (" +
                      type_to_string(arrays.front().dtype(), arrays.front().shape()) + ")");
  }
  const int64_t dimension = canonical_axis("concatenate", axis, arrays.front());
  if (arrays.size() == 1) return arrays.front();
  // jnp.concatenate promotes the operands to their common dtype first.
  DType common_dtype = arrays.front().dtype();
  for (const Array& array : arrays) {
    common_dtype = promote_types("concatenate", common_dtype, array.dtype());
  }
  std::vector<Array> operands;
  for (const Array& array : arrays) operands.push_back(convert_if_needed(array, common_dtype));
  return ir::bind1(*kConcatenate, operands, {{"dimension", dimension}});
}

// lax.slice with unit strides: 0 <= start <= limit <= shape in every dimension.
Array slice(const Array& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit) {
  return ir::bind1(*kSlice, {x}, {{"start_indices", start}, {"limit_indices", limit}});
}

// jnp.take_along_axis with mode "fill" (its default). x and indices broadcast against each
// other off the axis (jnp's out_shape = broadcast_shapes(idx_shape, arr_shape with 1 on axis)).
// x: [.., N, ..], indices: [.., M, ..] -> out: [.., M, ..]
Array take_along_axis(const Array& x, const Array& indices, int64_t axis) {
  const std::string types = type_to_string(x.dtype(), x.shape()) + " and indices " +
                            type_to_string(indices.dtype(), indices.shape());
  if (!is_integer(indices.dtype())) {
    throw EngineError("take_along_axis: indices must be of integer type, got " + types);
  }
  if (x.ndim() != indices.ndim()) {
    throw EngineError(
        "take_along_axis: indices and arr must have the same number of "
        "dimensions; " +
        std::to_string(indices.ndim()) + " vs. " + std::to_string(x.ndim()) + " (" + types + ")");
  }
  const size_t axis_index = static_cast<size_t>(canonical_axis("take_along_axis", axis, x));
  Shape out_shape = indices.shape();
  Shape x_shape = x.shape();
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (d == axis_index || x_shape[d] == out_shape[d] || x_shape[d] == 1) continue;
    if (out_shape[d] != 1) {
      throw EngineError("take_along_axis: incompatible shapes for broadcasting off axis " +
                        std::to_string(axis_index) + ": " + types);
    }
    out_shape[d] = x_shape[d];
  }
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (d != axis_index) x_shape[d] = out_shape[d];
  }
  if (x.shape()[axis_index] == 0) return zeros(out_shape, x.dtype());  // as jnp: lax.full(.., 0)
  const Array x_broadcast = x.shape() == x_shape ? x : broadcast_to(x, x_shape);
  const Array indices_broadcast =
      indices.shape() == out_shape ? indices : broadcast_to(indices, out_shape);
  return gather_along_axis(x_broadcast, indices_broadcast, static_cast<int64_t>(axis_index),
                           std::nullopt);
}

Array dynamic_slice(const Array& x, const std::vector<Array>& starts, const Shape& slice_sizes) {
  std::vector<Array> inputs = {x};
  inputs.insert(inputs.end(), starts.begin(), starts.end());
  return ir::bind1(*kDynamicSlice, inputs, {{"slice_sizes", slice_sizes}});
}

}  // namespace pmap_engine
