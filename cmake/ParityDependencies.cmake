# Every third-party dependency, found once, as an imported target. A missing one stops the
# configure step with the Debian package that provides it (scripts/install-deps.sh installs all).

macro(parity_find_package name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR
      "parity: CMake package '${name}' not found. Install the Debian package "
      "'${debian_package}' (or run scripts/install-deps.sh, which installs everything).")
  endif()
endmacro()

parity_find_package(nlohmann_json nlohmann-json3-dev)
parity_find_package(tomlplusplus libtomlplusplus-dev)
parity_find_package(CLI11 libcli11-dev)
parity_find_package(fmt libfmt-dev)
parity_find_package(ZLIB zlib1g-dev)
# Header-only: Boost.Math's Student t for the equivalence test over seeds.
parity_find_package(Boost libboost-math-dev CONFIG)
# libzip through pkg-config: Debian 12's libzip CMake config names command-line tools
# (/usr/bin/zipcmp, ...) that libzip-dev does not install, and fails when they are absent.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBZIP QUIET IMPORTED_TARGET libzip)
endif()
if(NOT LIBZIP_FOUND)
  message(FATAL_ERROR
    "parity: libzip not found through pkg-config. Install the Debian packages 'libzip-dev' and "
    "'pkg-config' (or run scripts/install-deps.sh, which installs everything).")
endif()
# Nettle's SHA-1: Flax folds each parameter's module path into its key through SHA-1.
pkg_check_modules(NETTLE QUIET IMPORTED_TARGET nettle)
if(NOT NETTLE_FOUND)
  message(FATAL_ERROR
    "parity: nettle not found through pkg-config. Install the Debian package 'nettle-dev' "
    "(or run scripts/install-deps.sh, which installs everything).")
endif()
parity_find_package(Threads libc6-dev)
parity_find_package(Torch libtorch-dev)
parity_find_package(Gloo libgloo-dev)
if(PARITY_BUILD_TESTS)
  parity_find_package(GTest libgtest-dev)
endif()
if(PARITY_BUILD_BENCH)
  parity_find_package(benchmark libbenchmark-dev)
endif()

# Torch: TorchConfig.cmake defines a plain `torch` target plus TORCH_CXX_FLAGS (the ABI flag);
# wrap it so that consumers get both, and the shim include directory for the one header that
# Debian's libtorch-dev omits (see cmake/torch_shim/.../context.h).
add_library(parity::torch INTERFACE IMPORTED GLOBAL)
target_link_libraries(parity::torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(parity::torch SYSTEM INTERFACE
  "${CMAKE_CURRENT_LIST_DIR}/torch_shim")
separate_arguments(_parity_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(parity::torch INTERFACE ${_parity_torch_flags})
# ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO, the flag LibTorch itself was
# built with (Debian builds c10d with Gloo).
target_compile_definitions(parity::torch INTERFACE USE_C10D_GLOO)

# Gloo: Debian ships GlooTargets.cmake with a `gloo` target.
add_library(parity::gloo INTERFACE IMPORTED GLOBAL)
target_link_libraries(parity::gloo INTERFACE gloo)

# OpenBLAS: Debian's libopenblas-dev ships a CMake config (OpenBLASConfig.cmake) with
# OpenBLAS_LIBRARIES / OpenBLAS_INCLUDE_DIRS.
parity_find_package(OpenBLAS libopenblas-dev)
add_library(parity::openblas INTERFACE IMPORTED GLOBAL)
target_link_libraries(parity::openblas INTERFACE ${OpenBLAS_LIBRARIES})
target_include_directories(parity::openblas SYSTEM INTERFACE ${OpenBLAS_INCLUDE_DIRS})

# oneDNN 2.6.3, the version LibTorch 1.13 runs its CPU convolutions on: the engine's f32
# convolutions and batched products (Debian's libdnnl-dev ships dnnl-config.cmake, DNNL::dnnl).
# Debian builds it on OpenMP, whose per-thread team size the engine sets around each call
# (pmap_engine/src/ops/onednn_runtime.h): hence libgomp, linked by name (OpenMP::OpenMP_CXX would
# also compile every engine source with -fopenmp, which none needs).
parity_find_package(dnnl libdnnl-dev CONFIG)
add_library(parity::dnnl INTERFACE IMPORTED GLOBAL)
target_link_libraries(parity::dnnl INTERFACE DNNL::dnnl gomp)

include(ParityCuda)
