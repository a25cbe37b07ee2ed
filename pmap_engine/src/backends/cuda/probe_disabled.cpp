// probe_cuda() where the build has no CUDA toolkit (cmake/ParityCuda.cmake): no CUDA devices,
// and the reason says how to build with them.
#include "pmap_engine/device.h"

namespace pmap_engine {

CudaProbe probe_cuda() {
  return {0,
          "this build of parity has no CUDA support (configured with PARITY_CUDA=OFF, or "
          "PARITY_CUDA=AUTO found no CUDA toolkit; reconfigure with -DPARITY_CUDA=ON "
          "-DCUDAToolkit_ROOT=<toolkit directory>)"};
}

}  // namespace pmap_engine
