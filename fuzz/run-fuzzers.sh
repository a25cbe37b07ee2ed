#!/usr/bin/env bash
# Runs each fuzz target of a PARITY_FUZZ build for a fixed time, one after the other (the
# 2-core machines parity targets have no room for more), and fails when any target finds
# something. Used by `make fuzz`; docs/faults.md ("Fuzzing") says how to read what it leaves.
#
#   fuzz/run-fuzzers.sh BUILD_DIR SECONDS [TARGET ...]    (default: every target built)
#
# For target T (fuzz_T):
#   fuzz/corpus/T/         seeds, kept in git (fuzz/make-seeds.py writes them)
#   fuzz/dict/T.dict       libFuzzer dictionary, when there is one
#   BUILD_DIR/fuzz-corpus/T/   the corpus libFuzzer grows; reused by the next run
#   BUILD_DIR/fuzz-findings/T/ crash-*, leak-*, timeout-*, oom-* inputs
#   BUILD_DIR/fuzz-logs/T.log  libFuzzer's output
set -uo pipefail

build_dir=${1:?usage: run-fuzzers.sh BUILD_DIR SECONDS [TARGET ...]}
seconds=${2:?usage: run-fuzzers.sh BUILD_DIR SECONDS [TARGET ...]}
shift 2
source_dir=$(cd "$(dirname "$0")/.." && pwd)

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < "$build_dir/fuzz/targets.txt"
fi

# Per input: 10 s before libFuzzer calls it a hang (the slowest parser takes milliseconds); the
# process may hold 2 GiB and no single allocation may exceed 1 GiB: a reader that believes a
# length field and allocates what it says is a finding, not a slow run.
options=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -use_value_profile=1
         -print_final_stats=1 -max_total_time="$seconds")
# Every sanitizer report is fatal and names the frame.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=()
for target in "${targets[@]}"; do
  binary="$build_dir/fuzz/fuzz_$target"
  if [ ! -x "$binary" ]; then
    echo "fuzz: $binary not built" >&2
    failed+=("$target (not built)")
    continue
  fi
  corpus="$build_dir/fuzz-corpus/$target"
  findings="$build_dir/fuzz-findings/$target"
  log="$build_dir/fuzz-logs/$target.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  target_options=("${options[@]}" -artifact_prefix="$findings/")
  if [ -f "$source_dir/fuzz/dict/$target.dict" ]; then
    target_options+=(-dict="$source_dir/fuzz/dict/$target.dict")
  fi
  seeds=()
  if [ -d "$source_dir/fuzz/corpus/$target" ]; then seeds=("$source_dir/fuzz/corpus/$target"); fi

  echo "fuzz: fuzz_$target for ${seconds} s (log $log)"
  # Its own scratch directory (fuzz_support.cpp), removed afterwards even after a crash.
  scratch="${TMPDIR:-/tmp}/parity-fuzz-$target-$$"
  [ -d /dev/shm ] && scratch="/dev/shm/parity-fuzz-$target-$$"
  PARITY_FUZZ_SCRATCH="$scratch" "$binary" "${target_options[@]}" "$corpus" "${seeds[@]}" \
    >"$log" 2>&1
  status=$?
  rm -rf "$scratch"
  # libFuzzer's last "#N DONE ..." or crash line and "Done N runs in S second(s)".
  grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs' "$log" | sed 's/^/  /'
  if [ "$status" -ne 0 ]; then
    echo "fuzz: fuzz_$target FOUND A PROBLEM (exit $status); input(s) in $findings/:" >&2
    grep -E 'parity-fuzz FINDING|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY:' \
      "$log" | head -5 | sed 's/^/  /' >&2
    ls "$findings" | sed 's/^/    /' >&2
    failed+=("$target")
  fi
done

if [ "${#failed[@]}" -ne 0 ]; then
  echo "fuzz: findings in ${failed[*]}; keep each input as a regression test (docs/faults.md, Fuzzing)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${seconds} s each without a finding"
