# AddressSanitizer + UndefinedBehaviorSanitizer for every object and executable of the build.
# Two builds use these flags:
#   PARITY_SANITIZE=ON  (`make test-sanitize`, build-sanitize/, GCC): the whole project and its
#                        tests, run under the sanitizers by scripts/sanitize/run.sh;
#   PARITY_FUZZ=ON      (`make fuzz`, build-fuzz/, clang): the parsers, which
#                        cmake/ParityFuzz.cmake also instruments for libFuzzer.
# LibTorch, OpenBLAS, Gloo and the other Debian libraries are not instrumented: ASan still sees
# their heap (malloc/free are intercepted), not their own out-of-bounds accesses.

# -fno-sanitize-recover=all: undefined behaviour stops the process like an ASan error does,
#   instead of printing a line and going on (a test would pass with a report in its log).
# -O1 -g -fno-omit-frame-pointer: stacks with file:line and every frame; -O1 keeps the run time
#   of the instrumented tests reasonable (later on the command line than the build type's -O2).
# -fdebug-prefix-map: the debug information names paths relative to the checkout, so that ccache
#   (with CCACHE_BASEDIR, which the Makefile sets) serves a clone in another folder too; ccache
#   hashes the mapped working directory instead of the real one for -g compilations.
set(PARITY_SANITIZER_COMPILE_OPTIONS
  -fsanitize=address,undefined
  -fno-sanitize-recover=all
  -fno-omit-frame-pointer
  -g -O1
  "-fdebug-prefix-map=${PROJECT_SOURCE_DIR}=.")
set(PARITY_SANITIZER_LINK_OPTIONS -fsanitize=address,undefined)

if(PARITY_SANITIZE OR PARITY_FUZZ)
  if(PARITY_SANITIZE AND NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "parity: PARITY_SANITIZE=ON needs GCC or clang (-fsanitize=address,undefined).")
  endif()
  # Directory-wide, before any target is defined: every library, test, tool and the `parity`
  # executable (which tests start as a child process) is instrumented the same way.
  add_compile_options(${PARITY_SANITIZER_COMPILE_OPTIONS})
  add_link_options(${PARITY_SANITIZER_LINK_OPTIONS})
endif()

if(PARITY_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC's own advice: "sanitizers tend to increase the rate of false positive warnings, most
  # notably those around -Wmaybe-uninitialized"; GCC 12 with -O1 -fsanitize=address warns in
  # libstdc++'s <regex> (std::function in _State) for every file that includes it. The Release
  # build checks the warnings (with -Werror in CI); `make test-sanitize` builds with
  # PARITY_WERROR=OFF and without this one warning.
  add_compile_options(-Wno-maybe-uninitialized)
endif()
