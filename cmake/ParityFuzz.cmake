# The libFuzzer build (PARITY_FUZZ=ON, `make fuzz`, fuzz/): only the libraries that parse outside
# input (common/'s libraries, parity_interop and the PRNG they link), instrumented for libFuzzer with
# AddressSanitizer and UndefinedBehaviorSanitizer, plus one fuzz target per parser. LibTorch,
# the engine, ddp_ref, the CLI, the tests and the benchmarks are left out: clang with sanitizers
# would make them slow to build and none of them reads a file a user hands in.

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR
    "parity: PARITY_FUZZ=ON needs clang (libFuzzer is part of clang's compiler-rt); configure "
    "with -DCMAKE_CXX_COMPILER=clang++-14 (Debian packages clang-14 and libclang-rt-14-dev), "
    "as `make fuzz` does.")
endif()

# Every object of this build gets coverage instrumentation; ASan and UBSan, with undefined
# behaviour aborting (so that libFuzzer keeps the input that caused it), come from
# cmake/ParitySanitize.cmake, which CMakeLists.txt includes for this build too. Only the fuzz
# targets link libFuzzer's main (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
add_compile_options(
  -fsanitize=fuzzer-no-link
  # ParityWarnings.cmake's set is GCC's (-Wshadow=local); clang need not know every option.
  -Wno-unknown-warning-option)

# The dependencies of common/'s libraries and parity_interop only (cmake/ParityDependencies.cmake
# finds them, and LibTorch, Gloo and OpenBLAS, for the full build).
foreach(_parity_package nlohmann_json tomlplusplus fmt ZLIB Threads)
  find_package(${_parity_package} QUIET)
  if(NOT ${_parity_package}_FOUND)
    message(FATAL_ERROR "parity: CMake package '${_parity_package}' not found; run "
                        "scripts/install-deps.sh, which installs every dependency.")
  endif()
endforeach()
# libzip through pkg-config, as the full build finds it (.npz archives).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBZIP QUIET IMPORTED_TARGET libzip)
endif()
if(NOT LIBZIP_FOUND)
  message(FATAL_ERROR "parity: libzip not found through pkg-config; run scripts/install-deps.sh.")
endif()
pkg_check_modules(NETTLE QUIET IMPORTED_TARGET nettle)
if(NOT NETTLE_FOUND)
  message(FATAL_ERROR "parity: nettle not found through pkg-config; run scripts/install-deps.sh.")
endif()

# pmap_engine_random (JAX's threefry PRNG and the modelled release; common/ links it) without the
# rest of pmap_engine/CMakeLists.txt, which needs OpenBLAS and Gloo.
include("${PROJECT_SOURCE_DIR}/pmap_engine/random_library.cmake")
