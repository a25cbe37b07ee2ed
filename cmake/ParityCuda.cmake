# CUDA: the CUDA runtime API (CUDA::cudart), called from plain C++ to list the visible CUDA
# devices; no CUDA language, so neither nvcc nor a GPU is needed to build. PARITY_CUDA=AUTO uses
# the toolkit when FindCUDAToolkit finds it (nvcc on PATH, CUDA_PATH, or /usr/local/cuda; point
# it elsewhere with -DCUDAToolkit_ROOT=DIR), ON requires it, OFF builds without it. Sets
# PARITY_HAVE_CUDA for the targets that use it.

set(PARITY_CUDA AUTO CACHE STRING "Use the CUDA toolkit: AUTO (when found), ON (required), OFF")
set_property(CACHE PARITY_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${PARITY_CUDA}" _parity_cuda)
set(_parity_cuda_values AUTO ON OFF)
if(NOT _parity_cuda IN_LIST _parity_cuda_values)
  message(FATAL_ERROR "parity: PARITY_CUDA=${PARITY_CUDA}; expected AUTO, ON or OFF.")
endif()

set(PARITY_HAVE_CUDA OFF)
if(_parity_cuda STREQUAL "OFF")
  message(STATUS "parity: PARITY_CUDA=OFF; building without CUDA devices")
else()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(PARITY_HAVE_CUDA ON)
    message(STATUS "parity: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_LIBRARY_DIR})")
  elseif(_parity_cuda STREQUAL "ON")
    message(FATAL_ERROR
      "parity: PARITY_CUDA=ON but CMake found no CUDA toolkit. Pass -DCUDAToolkit_ROOT=DIR "
      "(the directory with bin/nvcc and include/cuda_runtime.h), or -DPARITY_CUDA=AUTO/OFF to "
      "build without CUDA devices.")
  else()
    message(STATUS "parity: no CUDA toolkit found; building without CUDA devices")
  endif()
endif()
