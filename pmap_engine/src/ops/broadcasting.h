// Broadcasting and dtype promotion of jax.numpy's binary functions, and the helper that undoes
// broadcasting in VJP rules.
//
// How jnp applies a binary op (jax/_src/numpy/util.py: promote_args = promote_shapes after
// promote_dtypes):
//   1. dtypes are promoted to a common one (convert_element_type where one differs);
//   2. ranks are equalised by prepending size-1 dimensions (broadcast_in_dim), except that a 0-d
//      operand is left alone;
//   3. the lax primitive itself broadcasts size-1 dimensions and 0-d operands
//      (jax/_src/lax/lax.py: broadcasting_shape_rule).
// So `x[3,4] + b[4]` traces as `c = broadcast_in_dim[shape=(1,4)] b; add x c`, and the add's VJP
// sums the cotangent over the dimension where c had size 1 (unbroadcast).
#pragma once

#include <string>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine {

// jnp's type promotion for the engine's dtypes (jax/_src/dtypes.py, the promotion lattice):
// same dtype stays; bool with anything -> the other; an integer with a float -> the float;
// bf16 with f16, or either with f32 -> f32; any float with f64 -> f64. i32 with u32 has no
// common type here (JAX would pick i64, which the engine lacks): EngineError naming `op`.
DType promote_types(const char* op, DType a, DType b);

// NumPy's broadcast of several shapes (trailing dimensions aligned; each equal or 1). On
// failure: "add: incompatible shapes f32[3,4] and f32[5]" with the rule spelled out.
Shape broadcast_shapes(const char* op, const std::vector<Array>& operands);

// A Python scalar operand (JAX's weak typing): it takes the array's dtype, except that a
// non-integral value next to an integer or bool array makes a f32 scalar (a Python float makes
// jnp promote ints to the default float), and an integral value next to a bool array makes an
// i32 scalar (a Python int). Integral values out of an integer dtype's range raise, as jnp's
// OverflowError. Returns a concrete 0-d array.
Array weak_scalar(const char* op, const Array& array, double value);

struct PromotedOperands {
  Array lhs;
  Array rhs;
};
// Steps 1 and 2 above for a binary op; checks the shapes first so that the error names the
// caller's operands.
PromotedOperands promote_binary_operands(const char* op, const Array& lhs, const Array& rhs);

// Steps 1 and 2 for dtypes only / shapes only (exposed for ops with more operands).
Array convert_if_needed(const Array& x, DType dtype);
Array promote_rank(const Array& x, size_t rank);

// Sums `cotangent` down to `input_shape`, undoing a broadcast of an input of that shape:
// over leading dimensions the input lacked and over dimensions where the input had size 1,
// then reshapes to the input's shape. Returns the cotangent as is when shapes already agree.
// cotangent: [..., broadcast shape] -> [input_shape]
Array unbroadcast(const Array& cotangent, const Shape& input_shape);

// Raises "op: operand is an empty Array() (...)" for a default-constructed Array.
void check_valid_operand(const char* op, const Array& x);

}  // namespace pmap_engine
