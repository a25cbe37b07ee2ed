// f32 element-wise math computed with the formulas XLA's CPU backend emits, as block functions
// over float arrays (`out[i] = f(in[i])` for i < n; `in == out` is allowed).
//
// Sources (openxla/xla; jax-v0.11.0 pins XLA 131bf41acb4650e4391a640c3f1859c1c86ad74b in
// third_party/xla/revision.bzl, a commit not readable here, so these are the newest versions
// read, each named by its file and function):
//   tanh      xla/codegen/intrinsic/tanh.cc, EmitFastTanh (with_fma = true), the f32 tanh that
//             xla/service/cpu/elemental_ir_emitter.cc (CpuElementalIrEmitter::EmitTanh) calls
//   exp       xla/backends/cpu/codegen/polynomial_approximations.cc, GenerateVF32Exp, which
//             replaces every llvm.exp.f32 call the elemental emitter makes (EmitExp)
//   logistic  1 / (1 + exp(-x)): XLA's LogisticExpander rewrites HLO logistic so on CPU, and
//             exp is GenerateVF32Exp's
//
// Rounding: XLA:CPU compiles with llvm::TargetOptions::AllowFPOpFusion = FPOpFusion::Fast
// (CompilerTargetOptions in its CPU compiler) for the host CPU, so on an FMA machine LLVM fuses
// each multiply whose only use is an add or subtract into one fused multiply-add. The functions
// here apply std::fma exactly where that fusion happens (each says where) and round every other
// operation on its own. f64 is not here: the engine's f64 runs stay on <cmath>.
#pragma once

#include <cstddef>

namespace pmap_engine::xla_math {

// The block-function shape the element-wise kernels take for f32 (and for bf16/f16, which
// compute in f32).
using F32BlockFn = void (*)(const float* in, float* out, size_t n);

void tanh_f32(const float* in, float* out, size_t n);
void exp_f32(const float* in, float* out, size_t n);
void logistic_f32(const float* in, float* out, size_t n);

}  // namespace pmap_engine::xla_math
