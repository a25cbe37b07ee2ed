// The instruction sets the engine's own kernels may use (the fused element-wise loops of
// elementwise.cpp, XLA's f32 approximations in xla_math.cpp): what the CPU supports, found with
// __builtin_cpu_supports once per process, unless the environment lowers it.
//
//   PE_CPU_ISA=baseline   the x86-64 baseline builds only, on any CPU
//   PE_CPU_ISA=native     (or unset) the best build the CPU supports
//
// Every build of a kernel computes the same bits (each file says why), so the setting changes
// speed, never results; it exists so that the baseline builds run, and are tested, on machines
// whose CPUs would never pick them. An unknown value is reported on stderr and read as native:
// the kernels register during static initialisation, where no error can reach a caller.
#pragma once

namespace pmap_engine::ops {

struct CpuIsa {
  bool avx2 = false;
  bool fma = false;
};

const CpuIsa& cpu_isa();

}  // namespace pmap_engine::ops
