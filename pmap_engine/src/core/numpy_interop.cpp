#include "pmap_engine/numpy_interop.h"

#include "pmap_engine/dtype.h"

namespace pmap_engine {

std::string numpy_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    case DType::i32:
      return "int32";
    case DType::u32:
      return "uint32";
    case DType::bool_:
      return "bool";
  }
  return "?";
}

std::vector<double> numpy_asarray(const Array& x) {
  if (x.is_traced()) {
    // Tracer._error_repr: "traced array with shape " + aval.str_short(), whose dtype is
    // NumPy's name (core.py str_short_aval at jax-v0.11.0).
    std::string shape;
    for (size_t i = 0; i < x.shape().size(); ++i) {
      shape += (i ? "," : "") + std::to_string(x.shape()[i]);
    }
    throw EngineError("The numpy.ndarray conversion method __array__() was called on traced "
                      "array with shape " +
                      numpy_dtype_name(x.dtype()) + "[" + shape +
                      "] (pmap_engine: a NumPy function was given a traced array; inside jit, "
                      "grad or pmap use the jax.numpy function instead, pmap_engine's ops, or "
                      "move the NumPy call outside the transformation)");
  }
  return x.to_doubles();
}

}  // namespace pmap_engine
