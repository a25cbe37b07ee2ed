// Reductions: the primitives reduce_sum and reduce_max (lax level) and the jnp-level ops sum,
// mean and max built on them.
//
// Vocabulary. A reduction folds the *reduced axes* of x away and keeps the *kept axes*:
//   x: [A, B, C], axes=(1,) -> out: [A, C]; every output element is the fold of the B input
//   elements that share its kept coordinates (its *group*).
// The primitive's `axes` param is canonical: non-negative, distinct, sorted (as jnp passes
// them to lax). The jnp-level ops canonicalise negative axes, treat empty axes as "all", apply
// keepdims, and choose the computation dtype as jax/_src/numpy/reductions.py does:
//   - jnp.sum upcasts bf16/f16 to f32 for the computation and casts the result back
//     (_reduce_sum passes upcast_f16_for_computation=True); bool sums to i32
//     (_cast_to_numeric, promote_integers);
//   - jnp.mean divides the f32 sum by the element count in f32 and casts back for bf16/f16;
//     integer and bool inputs give f32 (dtypes.to_inexact_dtype);
//   - jnp.max has no upcast and no identity: a zero-size reduction is an error.
//
// Kernel accumulation order: each group is folded in row-major order of x, in the compute type
// of the dtype (f32 for f32/bf16/f16, f64 for f64, wrapping 32-bit for integers). XLA may fold
// in another order, so sums agree with JAX to rounding, not bit for bit.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ir/primitive.h"
#include "ops/kernel_util.h"
#include "pmap_engine/ops.h"

namespace pmap_engine {
namespace {

// Output shape of reducing `shape` over canonical `axes`; errors name the op and operand.
Shape reduced_shape(const char* op, DType dtype, const Shape& shape,
                    const std::vector<int64_t>& axes) {
  std::vector<bool> is_reduced(shape.size(), false);
  for (int64_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) {
      throw EngineError(std::string(op) + ": reduction axes " + tuple_to_string(axes) +
                        " contains out-of-bounds indices for " + type_to_string(dtype, shape));
    }
    if (is_reduced[static_cast<size_t>(axis)]) {
      throw EngineError(std::string(op) + ": duplicate value in 'axes' of reduction: " +
                        tuple_to_string(axes) + " for " + type_to_string(dtype, shape));
    }
    is_reduced[static_cast<size_t>(axis)] = true;
  }
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!is_reduced[d]) out.push_back(shape[d]);
  }
  return out;
}

// The kept axes of an ndim-array reduced over `axes`: broadcast_dimensions for the way back.
std::vector<int64_t> kept_axes(int64_t ndim, const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < ndim; ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
  }
  return kept;
}

// For every input dimension, the output stride it advances (0 for a reduced axis), so that a
// row-major walk of x finds each element's group by a dot product with its coordinates.
std::vector<int64_t> group_strides(const Shape& input_shape, const std::vector<int64_t>& axes) {
  std::vector<int64_t> strides(input_shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = input_shape.size(); d-- > 0;) {
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end()) continue;
    strides[d] = stride;
    stride *= input_shape[d];
  }
  return strides;
}

// Whether `axes` (sorted) are the first axes.count() dimensions, or the last ones.
bool leading_axes(const std::vector<int64_t>& axes) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}
bool trailing_axes(const std::vector<int64_t>& axes, size_t ndim) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != static_cast<int64_t>(ndim - axes.size() + i)) return false;
  }
  return true;
}

// Folds each group of x with `combine`, starting from `init`, its elements in row-major order
// (each group's order is the same whichever loop below runs). x: [...], out: reduced shape.
template <typename Element, typename Combine>
Buffer reduce_kernel(const Buffer& x, const std::vector<int64_t>& axes,
                     typename Element::Compute init, Combine combine) {
  using Compute = typename Element::Compute;
  using Storage = typename Element::Storage;
  Buffer out = Buffer::allocate_uninitialized(x.dtype, reduced_shape("reduce", x.dtype, x.shape, axes));
  // Not a std::vector: bool accumulators (reduce_max of bool) need real references.
  const size_t num_groups = out.num_elements();
  std::unique_ptr<Compute[]> accumulators(new Compute[num_groups]);
  std::fill(accumulators.get(), accumulators.get() + num_groups, init);
  Compute* acc = accumulators.get();
  const Storage* input = x.data<Storage>();
  const size_t group_size = num_groups == 0 ? 0 : x.num_elements() / num_groups;
  if (num_groups > 0 && trailing_axes(axes, x.shape.size())) {
    // Each group is a contiguous run.
    for (size_t g = 0; g < num_groups; ++g) {
      const Storage* run = input + g * group_size;
      for (size_t i = 0; i < group_size; ++i) acc[g] = combine(acc[g], Element::load(run[i]));
    }
  } else if (num_groups > 0 && leading_axes(axes)) {
    // Row i of the reduced axes adds into every group at once (vectorised across groups).
    for (size_t i = 0; i < group_size; ++i) {
      const Storage* row = input + i * num_groups;
      for (size_t g = 0; g < num_groups; ++g) acc[g] = combine(acc[g], Element::load(row[g]));
    }
  } else {
    for_each_strided<1>(x.shape, {group_strides(x.shape, axes)},
                        [&](size_t flat_index, const std::array<int64_t, 1>& group) {
                          Compute& accumulator = acc[static_cast<size_t>(group[0])];
                          accumulator = combine(accumulator, Element::load(input[flat_index]));
                        });
  }
  Storage* output = out.data<Storage>();
  for (size_t i = 0; i < num_groups; ++i) output[i] = Element::store(accumulators[i]);
  return out;
}

// lax.max propagates NaN (XLA's semantics): once a group holds a NaN the result is NaN.
template <typename Compute>
Compute nan_propagating_max(Compute accumulator, Compute value) {
  if constexpr (std::is_floating_point_v<Compute>) {
    if (std::isnan(value)) return value;
  }
  return value > accumulator ? value : accumulator;
}

template <typename Compute>
Compute lowest_value() {
  if constexpr (std::is_floating_point_v<Compute>) {
    return -std::numeric_limits<Compute>::infinity();
  } else {
    return std::numeric_limits<Compute>::lowest();
  }
}

std::vector<ir::AbstractValue> reduce_abstract_eval(const char* op,
                                                    const std::vector<ir::AbstractValue>& inputs,
                                                    const ir::Params& params, bool allow_bool) {
  const ir::AbstractValue& x = inputs.at(0);
  if (x.dtype == DType::bool_ && !allow_bool) {
    throw EngineError(std::string(op) + ": operand must be numeric, got " +
                      type_to_string(x.dtype, x.shape) + " (convert with astype first)");
  }
  return {{x.dtype, reduced_shape(op, x.dtype, x.shape, params.ints("axes"))}};
}

// Binds reduce_sum itself (defined below), without jnp's dtype handling.
Array bind_reduce_sum(const Array& x, const std::vector<int64_t>& axes);

// reduce_sum transpose (lax.py _reduce_sum_transpose_rule): broadcast the cotangent back over
// the reduced axes. ct: [kept dims] -> x: [...]
std::vector<Array> reduce_sum_vjp(const ir::VjpArgs& args) {
  const Array& x = args.inputs[0];
  const Array& ct = args.output_cotangents[0];
  return {broadcast_in_dim(ct, x.shape(), kept_axes(x.ndim(), args.params.ints("axes")))};
}

// reduce_max (lax.py _reduce_chooser_jvp_rule, transposed): the cotangent goes to the
// positions equal to the maximum, split evenly between ties.
// x: [...], ans/ct: [kept dims]
std::vector<Array> reduce_max_vjp(const ir::VjpArgs& args) {
  const Array& x = args.inputs[0];
  const Array& ans = args.outputs[0];
  const Array& ct = args.output_cotangents[0];
  const std::vector<int64_t>& axes = args.params.ints("axes");
  const std::vector<int64_t> kept = kept_axes(x.ndim(), axes);
  Array indicators = astype(equal(x, broadcast_in_dim(ans, x.shape(), kept)), ct.dtype());
  Array counts = bind_reduce_sum(indicators, axes);  // [kept dims], >= 1 unless NaN
  return {mul(indicators, broadcast_in_dim(div(ct, counts), x.shape(), kept))};
}

const ir::Primitive* kReduceSum = ir::register_primitive({
    "reduce_sum",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return reduce_abstract_eval("reduce_sum", inputs, params, /*allow_bool=*/false);
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      const Buffer& x = *inputs[0];
      return std::vector<Buffer>{dispatch_numeric(x.dtype, [&](auto element) {
        using Element = decltype(element);
        using Compute = typename Element::Compute;
        return reduce_kernel<Element>(x, params.ints("axes"), Compute(0),
                                      [](Compute a, Compute b) { return wrapping_add(a, b); });
      })};
    },
    reduce_sum_vjp,
});

const ir::Primitive* kReduceMax = ir::register_primitive({
    "reduce_max",
    [](const std::vector<ir::AbstractValue>& inputs, const ir::Params& params) {
      return reduce_abstract_eval("reduce_max", inputs, params, /*allow_bool=*/true);
    },
    [](const std::vector<const Buffer*>& inputs, const ir::Params& params) {
      const Buffer& x = *inputs[0];
      return std::vector<Buffer>{dispatch_all(x.dtype, [&](auto element) {
        using Element = decltype(element);
        using Compute = typename Element::Compute;
        return reduce_kernel<Element>(
            x, params.ints("axes"), lowest_value<Compute>(),
            [](Compute a, Compute b) { return nan_propagating_max(a, b); });
      })};
    },
    reduce_max_vjp,
});

// --- jnp level ---

// jnp's _reduction_dims: negative axes count from the end; empty = every axis; duplicates and
// out-of-range axes are errors (NumPy's AxisError text). Returns sorted canonical axes.
std::vector<int64_t> canonical_axes(const char* op, const Array& x, std::vector<int64_t> axes) {
  const int64_t ndim = x.ndim();
  if (axes.empty()) {
    for (int64_t d = 0; d < ndim; ++d) axes.push_back(d);
    return axes;
  }
  std::vector<int64_t> canonical;
  for (int64_t axis : axes) {
    if (axis < -ndim || axis >= ndim) {
      throw EngineError(std::string(op) + ": axis " + std::to_string(axis) +
                        " is out of bounds for array of dimension " + std::to_string(ndim) + " (" +
                        type_to_string(x.dtype(), x.shape()) + ")");
    }
    canonical.push_back(axis < 0 ? axis + ndim : axis);
  }
  std::vector<int64_t> sorted = canonical;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw EngineError(std::string(op) + ": duplicate value in 'axis': " + tuple_to_string(axes) +
                      " for " + type_to_string(x.dtype(), x.shape()));
  }
  return sorted;
}

// keepdims (lax.expand_dims): the reduced axes come back with size 1.
Array restore_reduced_axes(const Array& reduced, const Shape& input_shape,
                           const std::vector<int64_t>& axes) {
  Shape kept_shape = input_shape;
  for (int64_t axis : axes) kept_shape[static_cast<size_t>(axis)] = 1;
  return broadcast_in_dim(reduced, kept_shape,
                          kept_axes(static_cast<int64_t>(input_shape.size()), axes));
}

bool is_half_float(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

Array bind_reduce_sum(const Array& x, const std::vector<int64_t>& axes) {
  return ir::bind1(*kReduceSum, {x}, {{"axes", axes}});
}

Array reduce_sum_in(const Array& x, const std::vector<int64_t>& axes, DType computation_dtype) {
  return bind_reduce_sum(x.dtype() == computation_dtype ? x : astype(x, computation_dtype), axes);
}

}  // namespace

// jnp.sum: x [...] -> [kept dims]. bf16/f16 are summed in f32 and cast back; bool sums to i32.
Array sum(const Array& x, std::vector<int64_t> axes, bool keepdims) {
  axes = canonical_axes("sum", x, std::move(axes));
  const DType result_dtype = x.dtype() == DType::bool_ ? DType::i32 : x.dtype();
  const DType computation_dtype = is_half_float(result_dtype) ? DType::f32 : result_dtype;
  Array result = reduce_sum_in(x, axes, computation_dtype);
  if (result.dtype() != result_dtype) result = astype(result, result_dtype);
  return keepdims ? restore_reduced_axes(result, x.shape(), axes) : result;
}

// jnp.mean: sum / count, computed in f32 for bf16/f16 (upcast_f16_for_computation) and cast
// back; integer and bool inputs give f32. An empty reduction gives NaN (0 / 0), as in JAX.
Array mean(const Array& x, std::vector<int64_t> axes, bool keepdims) {
  axes = canonical_axes("mean", x, std::move(axes));
  const DType result_dtype = is_floating(x.dtype()) ? x.dtype() : DType::f32;
  const DType computation_dtype = is_half_float(result_dtype) ? DType::f32 : result_dtype;
  double count = 1.0;
  for (int64_t axis : axes) count *= static_cast<double>(x.shape()[static_cast<size_t>(axis)]);
  Array result = reduce_sum_in(x, axes, computation_dtype) / count;
  if (result.dtype() != result_dtype) result = astype(result, result_dtype);
  return keepdims ? restore_reduced_axes(result, x.shape(), axes) : result;
}

// jnp.max: no identity, so reducing a zero-size axis is an error (as jnp's _reduction says).
Array max(const Array& x, std::vector<int64_t> axes, bool keepdims) {
  axes = canonical_axes("max", x, std::move(axes));
  for (int64_t axis : axes) {
    if (x.shape()[static_cast<size_t>(axis)] == 0) {
      throw EngineError("max: zero-size array to reduction operation max which has no identity (" +
                        type_to_string(x.dtype(), x.shape()) + ", axes " + tuple_to_string(axes) +
                        "); pass a non-empty array");
    }
  }
  Array result = ir::bind1(*kReduceMax, {x}, {{"axes", axes}});
  return keepdims ? restore_reduced_axes(result, x.shape(), axes) : result;
}

}  // namespace pmap_engine
