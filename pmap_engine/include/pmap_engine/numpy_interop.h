// Handing an engine array to host NumPy code: np.asarray(x), which np.sin(x) and every other
// NumPy function does first. On a concrete array it is the values; on a tracer (inside jit,
// grad or pmap) JAX refuses with TracerArrayConversionError, raised by Tracer.__array__
// (jax/_src/core.py at jax-v0.4.38 and jax-v0.11.0; the text is TracerArrayConversionError's
// __init__ in jax/_src/errors.py, the same at both tags). Where JAX's message goes on to name the
// Python function being traced, the engine's adds, in parentheses, the fix JAX's docs give:
// jax.numpy.
#pragma once

#include <string>
#include <vector>

#include "pmap_engine/array.h"

namespace pmap_engine {

// x's values, as np.asarray(x) would see them. EngineError with JAX's text on a tracer.
std::vector<double> numpy_asarray(const Array& x);

// The dtype as NumPy names it ("float32", "bfloat16", "int32", "bool"): what JAX's avals print.
std::string numpy_dtype_name(DType dtype);

}  // namespace pmap_engine
