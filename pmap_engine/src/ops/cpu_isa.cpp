#include "ops/cpu_isa.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace pmap_engine::ops {
namespace {

CpuIsa detect() {
  CpuIsa native;
  native.avx2 = __builtin_cpu_supports("avx2");
  native.fma = __builtin_cpu_supports("fma");
  const char* setting = std::getenv("PE_CPU_ISA");
  const std::string value = setting == nullptr ? "" : setting;
  if (value.empty() || value == "native") return native;
  if (value == "baseline") return CpuIsa{};
  std::fprintf(stderr,
               "pmap_engine: PE_CPU_ISA=%s is not one of baseline, native; using what the CPU "
               "supports (native)\n",
               value.c_str());
  return native;
}

}  // namespace

const CpuIsa& cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

}  // namespace pmap_engine::ops
