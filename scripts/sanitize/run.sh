#!/usr/bin/env bash
# Runs COMMAND with the sanitizer options of `make test-sanitize` (build-sanitize/,
# cmake/ParitySanitize.cmake): any ASan, UBSan or LeakSanitizer report stops the process with
# SIGABRT. Every instrumented process it starts inherits them: ctest, the test executables, and
# the `parity` and worker executables that tests start as child processes.
#   scripts/sanitize/run.sh build-sanitize/tests/common/common_tests --gtest_filter='Npy*'
# With SANITIZER_LOG_DIR set, ASan's and LeakSanitizer's reports are written to files there
# (asan.EXE.PID) instead of stderr, so that none is lost when a test swallows a child's stderr or
# expects a child to fail; scripts/sanitize/ctest.sh then fails on any file there. GCC 12's UBSan
# still prints its report (message and stack) on stderr and writes only its SUMMARY line
# (file:line) to the file there (ubsan.EXE.PID), which is enough to fail the run.
# Options already in ASAN_OPTIONS, UBSAN_OPTIONS or LSAN_OPTIONS come after these and win.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

common="abort_on_error=1:halt_on_error=1:print_summary=1:symbolize=1:disable_coredump=1"
log=""
if [ -n "${SANITIZER_LOG_DIR:-}" ]; then
  mkdir -p "$SANITIZER_LOG_DIR"
  log_dir="$(cd "$SANITIZER_LOG_DIR" && pwd)"
  log=":log_exe_name=1:log_path=$log_dir"
fi

# ASan: leaks checked at exit (LeakSanitizer works here: it needs ptrace of its own threads,
# which this container allows); the order in which globals are initialised across files checked
# too (a static initialiser reading another file's global before it is constructed).
export ASAN_OPTIONS="$common:detect_leaks=1:check_initialization_order=1:strict_init_order=1:${log:+${log#:}/asan:}${ASAN_OPTIONS:-}"
# UBSan (-fno-sanitize-recover=all in the build already makes each check fatal).
export UBSAN_OPTIONS="$common:print_stacktrace=1:${log:+${log#:}/ubsan:}${UBSAN_OPTIONS:-}"
# LeakSanitizer: leaks of the uninstrumented libraries that are not ours to fix (lsan.supp says
# which and why).
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"

exec "$@"
