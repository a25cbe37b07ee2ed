// The CPU a suite ran on, for its context and its summary: the machines this project runs on
// are an Intel CPU with AVX-512 or an AMD one with AVX2 only, and OpenBLAS, oneDNN and the
// engine pick other kernels on each, so no figure means anything without it.
#pragma once

#include <fstream>
#include <string>

namespace parity::bench {

struct CpuInfo {
  std::string model;  // /proc/cpuinfo's "model name", or "unknown"
  std::string isa;    // the widest vector extension the CPU has: "AVX-512", "AVX2" or "SSE"
};

inline CpuInfo cpu_info() {
  CpuInfo info{"unknown", "SSE"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) info.model = line.substr(colon + 2);
    break;
  }
  if (__builtin_cpu_supports("avx512f")) {
    info.isa = "AVX-512";
  } else if (__builtin_cpu_supports("avx2")) {
    info.isa = "AVX2";
  }
  return info;
}

// "Intel(R) Xeon(R) Processor (AVX-512)"
inline std::string cpu_summary_line() {
  const CpuInfo info = cpu_info();
  return info.model + " (" + info.isa + ")";
}

}  // namespace parity::bench
