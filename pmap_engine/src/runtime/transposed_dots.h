// transpose(dot(a, b)) -> dot(b, a): XLA's algebraic simplifier rewrites a transpose of a
// matrix product into the product with its operands swapped (xla/service/algebraic_simplifier.cc,
// AlgebraicSimplifierVisitor::HandleTranspose), so the transposed copy JAX's VJP of dot_general
// traces (_dot_general_transpose_rhs: a dot_general, then a transpose) is never made. Here for
// the 2-D products without batch dimensions whose result only the transpose reads; the product
// of the swapped operands is the same gemm with the operands' layouts exchanged (OpenBLAS's
// transpose flags, or oneDNN's strides: ops/dot_kernel.h), and transposed_dots_test checks it
// against the transposed copy.
#pragma once

#include "runtime/compile.h"

namespace pmap_engine::runtime {

void fold_transposed_dots(Executable& executable);

}  // namespace pmap_engine::runtime
