// Constants, conversions and the two shape primitives broadcasting needs.
//
// Primitives (named and parametrised as in jax/_src/lax/lax.py):
//   broadcast_in_dim[broadcast_dimensions=... shape=...]  operand dim i -> output dim dims[i]
//   reshape[new_sizes=...]                                  same elements, new row-major shape
//   convert_element_type[new_dtype=... weak_type=False]     astype
//   iota[dimension=... dtype=... shape=...]                 index along one dimension
//   stop_gradient                                           identity without a VJP
// Constants follow lax.full: a 0-d host scalar broadcast with broadcast_in_dim, so a jitted
// program shows one broadcast of a literal, not a materialised array.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "ir/primitive.h"
#include "ir/trace.h"
#include "ir/varying_axes.h"
#include "ops/broadcasting.h"
#include "ops/broadcast_read.h"
#include "ops/kernel_util.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

using ir::AbstractValue;
using ir::Params;
using ir::VjpArgs;

void expect_num_inputs(const char* op, const std::vector<AbstractValue>& inputs, size_t count) {
  if (inputs.size() != count) {
    throw EngineError(std::string(op) + ": expected " + std::to_string(count) +
                      " operand(s), got " + std::to_string(inputs.size()));
  }
}

void check_dimensions_nonnegative(const char* op, const Shape& shape) {
  for (int64_t extent : shape) {
    if (extent < 0) {
      throw EngineError(std::string(op) + ": shape " + shape_to_string(shape) +
                        " has a negative dimension");
    }
  }
}

// Copies a buffer's elements into a new buffer of another shape (same element count).
Buffer copy_as(const Buffer& input, const Shape& shape) {
  Buffer output = Buffer::allocate_uninitialized(input.dtype, shape);
  if (input.num_bytes() > 0) std::memcpy(output.bytes->data(), input.bytes->data(), input.num_bytes());
  return output;
}

// --- broadcast_in_dim ---------------------------------------------------------------------
// operand: [d_0, ..., d_{r-1}] -> [shape], dimension i of the operand becoming dimension
// broadcast_dimensions[i] of the output; operand dimensions must equal their target or be 1.

std::vector<AbstractValue> broadcast_in_dim_abstract_eval(const std::vector<AbstractValue>& in,
                                                          const Params& params) {
  expect_num_inputs("broadcast_in_dim", in, 1);
  const Shape& shape = params.ints("shape");
  const std::vector<int64_t>& dims = params.ints("broadcast_dimensions");
  const Shape& operand = in[0].shape;
  auto fail = [&](const std::string& why) {
    throw EngineError("broadcast_in_dim: cannot broadcast " + type_of(in[0]) + " to shape " +
                      shape_to_string(shape) +
                      " with broadcast_dimensions=" + tuple_to_string(dims, ",") + ": " + why);
  };
  check_dimensions_nonnegative("broadcast_in_dim", shape);
  if (dims.size() != operand.size()) fail("need one broadcast dimension per operand dimension");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size())) {
      fail("dimension " + std::to_string(dims[i]) + " is out of range");
    }
    if (i > 0 && dims[i] <= dims[i - 1]) fail("broadcast_dimensions must be strictly increasing");
    int64_t target = shape[static_cast<size_t>(dims[i])];
    if (operand[i] != 1 && operand[i] != target) {
      fail("operand dimension " + std::to_string(i) + " has size " + std::to_string(operand[i]) +
           ", which is neither 1 nor the target size " + std::to_string(target));
    }
  }
  return {{in[0].dtype, shape}};
}

std::vector<Buffer> broadcast_in_dim_kernel(const std::vector<const Buffer*>& in,
                                            const Params& params) {
  const Buffer& operand = *in[0];
  const Shape& shape = params.ints("shape");
  Buffer output = Buffer::allocate_uninitialized(operand.dtype, shape);  // written in full
  const BroadcastRead view(shape,
                           broadcast_strides(operand.shape, shape, params.ints("broadcast_dimensions")));
  dispatch_width(operand.dtype, [&](auto width) {
    using T = typename decltype(width)::Storage;
    view.read(operand.data<T>(), 0, output.num_elements(), output.data<T>(), [](T x) { return x; });
  });
  return {output};
}

// The transpose of a broadcast is a sum (lax.py: _broadcast_in_dim_transpose_rule): over the
// output dimensions no operand dimension maps to, and over those an operand size-1 dimension
// was stretched to; reshaping restores the operand's unit dimensions.
// ct: [shape] -> [operand shape]
std::vector<Array> broadcast_in_dim_vjp(const VjpArgs& args) {
  const Array& ct = args.output_cotangents[0];
  if (!ct.valid() || !is_floating(args.inputs[0].dtype())) return {Array()};
  const Shape& operand = args.inputs[0].shape();
  const std::vector<int64_t>& dims = args.params.ints("broadcast_dimensions");
  std::vector<bool> kept(ct.shape().size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (operand[i] != 1) kept[static_cast<size_t>(dims[i])] = true;
  }
  std::vector<int64_t> summed_axes;
  for (size_t d = 0; d < kept.size(); ++d) {
    if (!kept[d]) summed_axes.push_back(static_cast<int64_t>(d));
  }
  // sum() with no axes reduces everything: skip it when nothing was broadcast.
  Array summed = summed_axes.empty() ? ct : sum(ct, summed_axes, false);
  return {summed.shape() == operand ? summed : reshape(summed, operand)};
}

const ir::Primitive* kBroadcastInDim = ir::register_primitive(
    {"broadcast_in_dim", broadcast_in_dim_abstract_eval, broadcast_in_dim_kernel,
     broadcast_in_dim_vjp});

// --- reshape ------------------------------------------------------------------------------
// x: [any] -> [new_sizes], the same number of elements in row-major order.

std::vector<AbstractValue> reshape_abstract_eval(const std::vector<AbstractValue>& in,
                                                 const Params& params) {
  expect_num_inputs("reshape", in, 1);
  const Shape& new_sizes = params.ints("new_sizes");
  check_dimensions_nonnegative("reshape", new_sizes);
  if (shape_num_elements(new_sizes) != shape_num_elements(in[0].shape)) {
    throw EngineError("reshape: cannot reshape " + type_of(in[0]) + " (" +
                      std::to_string(shape_num_elements(in[0].shape)) + " elements) into shape " +
                      shape_to_string(new_sizes) + " (" +
                      std::to_string(shape_num_elements(new_sizes)) + " elements)");
  }
  return {{in[0].dtype, new_sizes}};
}

std::vector<Buffer> reshape_kernel(const std::vector<const Buffer*>& in, const Params& params) {
  // A copy, not a view: buffers may be donated and updated in place, so none may alias.
  return {copy_as(*in[0], params.ints("new_sizes"))};
}

// ct: [new_sizes] -> [x shape]
std::vector<Array> reshape_vjp(const VjpArgs& args) {
  if (!args.output_cotangents[0].valid() || !is_floating(args.inputs[0].dtype())) return {Array()};
  return {reshape(args.output_cotangents[0], args.inputs[0].shape())};
}

const ir::Primitive* kReshape = ir::register_primitive(
    {"reshape", reshape_abstract_eval, reshape_kernel, reshape_vjp});

// --- convert_element_type -----------------------------------------------------------------
// x: [S] dtype a -> [S] new_dtype. Float to integer truncates toward zero, saturates at the
// integer's range and maps NaN to 0 (XLA's convert); anything to bool is `!= 0`; between
// integers it wraps. f64 to bf16/f16 rounds through f32 (the engine's 16-bit helpers take
// f32), which can differ from a direct rounding in the last bit for rare ties.

template <typename To, typename From>
To convert_value(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(value)) return To(0);
    // The limits as From: for i32/u32 maxima these round up to 2^31 / 2^32, so `>=` catches
    // every value a static_cast would overflow on.
    const From lowest = static_cast<From>(std::numeric_limits<To>::lowest());
    const From highest = static_cast<From>(std::numeric_limits<To>::max());
    if (value <= lowest) return std::numeric_limits<To>::lowest();
    if (value >= highest) return std::numeric_limits<To>::max();
    return static_cast<To>(value);
  } else {
    return static_cast<To>(value);
  }
}

std::vector<AbstractValue> convert_element_type_abstract_eval(
    const std::vector<AbstractValue>& in, const Params& params) {
  expect_num_inputs("convert_element_type", in, 1);
  return {{params.dtype("new_dtype"), in[0].shape}};
}

std::vector<Buffer> convert_element_type_kernel(const std::vector<const Buffer*>& in,
                                                const Params& params) {
  const Buffer& x = *in[0];
  Buffer output = Buffer::allocate_uninitialized(params.dtype("new_dtype"), x.shape);  // in full
  size_t num_elements = x.num_elements();
  dispatch_all(x.dtype, [&](auto from) {
    using From = decltype(from);
    dispatch_all(output.dtype, [&](auto to) {
      using To = decltype(to);
      const auto* source = x.data<typename From::Storage>();
      auto* target = output.data<typename To::Storage>();
      for (size_t i = 0; i < num_elements; ++i) {
        target[i] = To::store(
            convert_value<typename To::Compute>(From::load(source[i])));
      }
    });
  });
  return {output};
}

// Only float-to-float conversions carry a gradient (an integer has a float0 tangent in JAX):
// the cotangent converts back (lax.py: _convert_element_type_transpose_rule).
// ct: [S] new_dtype -> [S] x dtype
std::vector<Array> convert_element_type_vjp(const VjpArgs& args) {
  const Array& x = args.inputs[0];
  if (!args.output_cotangents[0].valid() || !is_floating(x.dtype()) ||
      !is_floating(args.params.dtype("new_dtype"))) {
    return {Array()};
  }
  return {astype(args.output_cotangents[0], x.dtype())};
}

const ir::Primitive* kConvertElementType = ir::register_primitive(
    {"convert_element_type", convert_element_type_abstract_eval, convert_element_type_kernel,
     convert_element_type_vjp});

// --- iota ---------------------------------------------------------------------------------
// () -> [shape], element = its index along `dimension`.

std::vector<AbstractValue> iota_abstract_eval(const std::vector<AbstractValue>& in,
                                              const Params& params) {
  expect_num_inputs("iota", in, 0);
  const Shape& shape = params.ints("shape");
  DType dtype = params.dtype("dtype");
  int64_t dimension = params.integer("dimension");
  check_dimensions_nonnegative("iota", shape);
  if (dimension < 0 || dimension >= static_cast<int64_t>(shape.size())) {
    throw EngineError("iota: dimension " + std::to_string(dimension) +
                      " is out of range for shape " + shape_to_string(shape));
  }
  if (dtype == DType::bool_) throw EngineError("iota: dtype bool is not supported; use i32");
  return {{dtype, shape}};
}

std::vector<Buffer> iota_kernel(const std::vector<const Buffer*>&, const Params& params) {
  const Shape& shape = params.ints("shape");
  Buffer output = Buffer::allocate_uninitialized(params.dtype("dtype"), shape);  // in full
  AxisSplit split = split_at_axis(shape, params.integer("dimension"));
  dispatch_numeric(output.dtype, [&](auto element) {
    using E = decltype(element);
    auto* target = output.data<typename E::Storage>();
    for (size_t outer = 0; outer < split.num_outer; ++outer) {
      for (size_t k = 0; k < split.axis_size; ++k) {
        auto value = E::store(static_cast<typename E::Compute>(k));
        for (size_t inner = 0; inner < split.num_inner; ++inner) {
          target[split.offset(outer, k, inner)] = value;
        }
      }
    }
  });
  return {output};
}

const ir::Primitive* kIota =
    ir::register_primitive({"iota", iota_abstract_eval, iota_kernel, nullptr});

// --- stop_gradient ------------------------------------------------------------------------
// x: [S] -> [S], the same values; no VJP, so no cotangent flows back through it.

std::vector<AbstractValue> stop_gradient_abstract_eval(const std::vector<AbstractValue>& in,
                                                       const Params&) {
  expect_num_inputs("stop_gradient", in, 1);
  return {in[0]};
}

std::vector<Buffer> stop_gradient_kernel(const std::vector<const Buffer*>& in, const Params&) {
  return {copy_as(*in[0], in[0]->shape)};
}

const ir::Primitive* kStopGradient = ir::register_primitive(
    {"stop_gradient", stop_gradient_abstract_eval, stop_gradient_kernel, nullptr});

std::vector<int64_t> identity_dimensions(size_t rank) {
  std::vector<int64_t> dims(rank);
  for (size_t i = 0; i < rank; ++i) dims[i] = static_cast<int64_t>(i);
  return dims;
}

}  // namespace

// --- public functions ---------------------------------------------------------------------

Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions) {
  check_valid_operand("broadcast_in_dim", x);
  // As lax.broadcast_in_dim, a broadcast that changes nothing records nothing.
  if (x.shape() == shape && broadcast_dimensions == identity_dimensions(shape.size())) return x;
  Params params{{"broadcast_dimensions", broadcast_dimensions}, {"shape", shape}};
  return ir::bind1(*kBroadcastInDim, {x}, params);
}

// jnp.broadcast_to: NumPy's rule (trailing dimensions aligned, each equal or 1).
Array broadcast_to(const Array& x, const Shape& shape) {
  check_valid_operand("broadcast_to", x);
  const Shape& from = x.shape();
  bool compatible = from.size() <= shape.size();
  size_t lead = compatible ? shape.size() - from.size() : 0;
  for (size_t i = 0; compatible && i < from.size(); ++i) {
    compatible = from[i] == 1 || from[i] == shape[lead + i];
  }
  if (!compatible) {
    throw EngineError("broadcast_to: cannot broadcast " + type_to_string(x.dtype(), from) +
                      " to shape " + shape_to_string(shape) +
                      " (NumPy broadcasting aligns trailing dimensions; each must be equal to "
                      "the target or 1)");
  }
  if (from == shape) return x;
  std::vector<int64_t> dims(from.size());
  for (size_t i = 0; i < from.size(); ++i) dims[i] = static_cast<int64_t>(lead + i);
  return broadcast_in_dim(x, shape, dims);
}

// lax.expand_dims is a broadcast_in_dim that skips the new axis.
Array expand_dims(const Array& x, int64_t axis) {
  check_valid_operand("expand_dims", x);
  int64_t out_rank = x.ndim() + 1;
  int64_t new_axis = normalize_axis("expand_dims", axis, out_rank);
  Shape shape = x.shape();
  shape.insert(shape.begin() + new_axis, 1);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < out_rank; ++d) {
    if (d != new_axis) dims.push_back(d);
  }
  return broadcast_in_dim(x, shape, dims);
}

Array reshape(const Array& x, const Shape& shape) {
  check_valid_operand("reshape", x);
  Shape new_sizes = shape;
  size_t inferred = new_sizes.size();
  size_t known_elements = 1;
  for (size_t i = 0; i < new_sizes.size(); ++i) {
    if (new_sizes[i] == -1 && inferred == new_sizes.size()) {
      inferred = i;
    } else if (new_sizes[i] < 0) {
      throw EngineError("reshape: cannot reshape " + type_to_string(x.dtype(), x.shape()) +
                        " into shape " + shape_to_string(shape) +
                        " (only one -1 is allowed, and no other negative size)");
    } else {
      known_elements *= static_cast<size_t>(new_sizes[i]);
    }
  }
  if (inferred < new_sizes.size()) {
    size_t num_elements = x.num_elements();
    if (known_elements == 0 || num_elements % known_elements != 0) {
      throw EngineError("reshape: cannot reshape " + type_to_string(x.dtype(), x.shape()) +
                        " into shape " + shape_to_string(shape) + " (" +
                        std::to_string(num_elements) + " elements do not divide into it)");
    }
    new_sizes[inferred] = static_cast<int64_t>(num_elements / known_elements);
  }
  if (new_sizes == x.shape()) return x;
  return ir::bind1(*kReshape, {x}, Params{{"new_sizes", new_sizes}});
}

Array astype(const Array& x, DType dtype) {
  check_valid_operand("astype", x);
  if (x.dtype() == dtype) return x;
  return ir::bind1(*kConvertElementType, {x},
                   Params{{"new_dtype", dtype}, {"weak_type", false}});
}

Array iota(DType dtype, const Shape& shape, int64_t dimension) {
  int64_t axis = normalize_axis("iota", dimension, static_cast<int64_t>(shape.size()));
  return ir::bind1(*kIota, {}, Params{{"dimension", axis}, {"dtype", dtype}, {"shape", shape}});
}

Array stop_gradient(const Array& x) {
  check_valid_operand("stop_gradient", x);
  return ir::bind1(*kStopGradient, {x});
}

Array full(const Shape& shape, double value, DType dtype) {
  check_dimensions_nonnegative("full", shape);
  Array literal = Array::scalar(value, dtype);
  return shape.empty() ? literal : broadcast_in_dim(literal, shape, {});
}

Array zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Array ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

namespace {

// lax.full_like (jax/_src/lax/lax.py, _full_like_insert_pvary): under shard_map(check_vma=True)
// the fill varies along the axes x varies along.
Array full_like(const Array& x, double value) {
  return ir::vary(full(x.shape(), value, x.dtype()), ir::TraceContext::varying_of(x));
}

}  // namespace

Array zeros_like(const Array& x) {
  check_valid_operand("zeros_like", x);
  return full_like(x, 0.0);
}

Array ones_like(const Array& x) {
  check_valid_operand("ones_like", x);
  return full_like(x, 1.0);
}

Array scalar_like(const Array& x, double value) {
  check_valid_operand("scalar_like", x);
  return Array::scalar(value, x.dtype());
}

}  // namespace pmap_engine
