#!/usr/bin/env bash
# `make test-sanitize`'s test run: every test `make test` runs (ctest -LE long), in the
# sanitizer build, with the options of scripts/sanitize/run.sh. Fails when a test fails or when
# any process, the test executables' children included, wrote a sanitizer report: reports go to
# files (BUILD_DIR/sanitizer-logs/), each printed here, so that a report of a child whose stderr
# a test captured, or whose failure a test expected, still fails the run.
#   scripts/sanitize/ctest.sh BUILD_DIR JOBS TIMEOUT_SECONDS [more ctest arguments]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="$1" jobs="$2" timeout="$3"
shift 3

logs="$(cd "$build_dir" && pwd)/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"

start=$(date +%s)
(cd "$build_dir" && SANITIZER_LOG_DIR="$logs" "$here/run.sh" \
  ctest --output-on-failure -j"$jobs" --timeout "$timeout" -LE long "$@")
status=$?
echo "test-sanitize: ctest took $(( $(date +%s) - start )) s"

reports=("$logs"/*)
if [ -e "${reports[0]}" ]; then
  for report in "${reports[@]}"; do
    echo "===== sanitizer report: ${report#"$logs"/} ====="
    cat "$report"
  done
  echo "test-sanitize: ${#reports[@]} sanitizer report(s), in $logs" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "test-sanitize: ctest failed (exit status $status)" >&2
  exit "$status"
fi
echo "test-sanitize: no sanitizer reports"
