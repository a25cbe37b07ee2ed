// probe_cuda() where the build has the CUDA toolkit: the CUDA runtime API from plain C++, so
// listing devices needs neither nvcc nor a GPU at build time.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "pmap_engine/device.h"

namespace pmap_engine {

CudaProbe probe_cuda() {
  // The runtime applies CUDA_VISIBLE_DEVICES itself, and leaves `count` alone on failure.
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return {count, ""};
  std::string error = status == cudaSuccess
                          ? std::string("cudaGetDeviceCount reports 0 devices")
                          : std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + " (" +
                                cudaGetErrorString(status) + ")";
  // Without any driver the runtime says "driver version is insufficient"; name the real cause.
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) {
    error += "; no NVIDIA driver is loaded";
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    error += std::string("; CUDA_VISIBLE_DEVICES=\"") + visible + "\"";
  }
  return {0, error};
}

}  // namespace pmap_engine
