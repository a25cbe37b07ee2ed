// eval_shape: jax.eval_shape as JAX defines it at jax-v0.11.0 (jax/_src/api.py, eval_shape):
// `jit(fun).trace(*args, **kwargs).out_info`, the output types of the traced function, with
// "instead of applying fun directly ... JAX's abstract interpretation machinery to evaluate the
// shapes without doing any FLOPs". Here: the trace jit makes, kept, never executed.
#include "pmap_engine/transforms.h"
#include "runtime/program_cache.h"

namespace pmap_engine {

Tree eval_shape(const TreeFunction& function, const std::vector<Tree>& args) {
  const runtime::TracedFunction traced = runtime::trace_function(
      function, args, /*static_argnums=*/{},
      [](size_t, size_t, const Array& leaf) { return leaf.shape(); }, "eval_shape(f)");
  std::vector<Array> types;
  for (const Array& leaf : traced.output.leaves()) {
    types.push_back(Array::shape_dtype_struct(leaf.shape(), leaf.dtype()));
  }
  return traced.output.unflatten(types);
}

}  // namespace pmap_engine
