# The README's commands. Each one installs what is missing, configures and builds, then runs.
#   make run    the main job: train the default case with ddp_ref and pmap_engine, compare,
#               write the report under parity-out/CASE/report
#   make test   run every test (ctest label "long" excluded; `make test-long` runs those)
#   make bench  run the benchmark suites
#   make fuzz   run every parser's libFuzzer target for FUZZ_SECONDS each (clang, build-fuzz/)
#   make test-sanitize  `make test`'s tests built and run with ASan + UBSan (GCC, build-sanitize/),
#               on the AVX2 paths whatever the CPU
BUILD_DIR ?= build
JOBS ?= 2
CASE ?= mlp2-fmnist
# Warnings are errors in CI (CI=true), plain warnings on a developer's machine.
WERROR := $(if $(filter true 1,$(CI)),ON,OFF)

# make fuzz: a clang build of the parsers only, with libFuzzer, ASan and UBSan (Debug keeps
# assertions; cmake/ParityFuzz.cmake adds -O1), each target run FUZZ_SECONDS (all, or the
# FUZZ_TARGETS named, e.g. FUZZ_TARGETS="npy npz"); findings fail the make.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

# make test-sanitize: the project and its tests built with AddressSanitizer and
# UndefinedBehaviorSanitizer (GCC; cmake/ParitySanitize.cmake: -O1 -g, undefined behaviour
# fatal) in a build folder of their own, then every test of `make test` run under
# scripts/sanitize/run.sh's options (LeakSanitizer on; scripts/sanitize/lsan.supp). Any report,
# from a test or from a process a test started, fails it (scripts/sanitize/ctest.sh). The
# benchmarks are not built (no test runs them), and warnings are not errors here (GCC warns
# falsely under the sanitizers; the Release build checks warnings). Instrumented tests run
# slower (the slowest took 177 s, measured), hence the longer per-test timeout. The build runs
# under run.sh too: gtest_discover_tests runs each test executable (--gtest_list_tests) as it
# is linked.
SANITIZE_BUILD_DIR ?= build-sanitize
SANITIZE_TIMEOUT ?= 1800
# The machines this project runs on have an Intel CPU with AVX-512 or an AMD one without it, at
# random, and every test must hold on both: the sanitized tests run on the AVX2 paths whatever
# the CPU, while `make test` takes the CPU's own. OpenBLAS's Haswell kernels (those an AVX2 CPU
# picks: its Zen target uses them for sgemm), ATen's AVX2 kernels, and the engine's x86-64
# baseline builds (pmap_engine/src/ops/cpu_isa.h; its AVX2 builds are what `make test` runs on
# either CPU). oneDNN's AVX2 kernels (LibTorch's convolutions) are not capped here for every
# test: ATen sends bf16 matrix products to oneDNN by the CPU's own flags, and oneDNN capped below
# them refuses those ("could not create a primitive descriptor iterator"), a combination no
# machine has; the tests that need them set DNNL_MAX_CPU_ISA=AVX2 for their own processes.
SANITIZE_CPU_PATHS ?= OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 PE_CPU_ISA=baseline

# ccache (CMakeLists.txt makes it the compiler launcher) rewrites absolute paths under the
# checkout into relative ones before hashing, so that a clone in another folder (a CI job's
# fresh checkout) hits the cache that an earlier one filled; without it every path in a
# compiler command line differs and nothing hits. The -g build maps the checkout's path out of
# its debug information too (cmake/ParitySanitize.cmake), which ccache needs for those hits.
export CCACHE_BASEDIR := $(CURDIR)
# ddp_ref and its tests compile LibTorch behind a precompiled header (ddp_ref/CMakeLists.txt);
# ccache caches those compilations only when told to ignore what it cannot check through a
# header's .gch (its #defines, and __DATE__/__TIME__, which no file here uses); without this,
# they are "could_not_use_precompiled_header" and every build compiles them again.
export CCACHE_SLOPPINESS := pch_defines,time_macros

.PHONY: all deps configure build run test test-long bench fuzz fuzz-build clean \
        sanitize-build test-sanitize

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DPARITY_WERROR=$(WERROR) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

run: build
	$(BUILD_DIR)/cli/parity run $(CASE)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 900 -LE long

test-long: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 3600 -L long

bench: build
	@mkdir -p $(BUILD_DIR)/bench-results
	@for suite in $(BUILD_DIR)/bench/parity_bench_*; do \
	  [ -x "$$suite" ] || continue; \
	  "$$suite" --benchmark_out=$(BUILD_DIR)/bench-results/$$(basename $$suite).json \
	            --benchmark_out_format=json \
	            --parity_summary_out=$(BUILD_DIR)/bench-results/$$(basename $$suite)-targets.json \
	            || exit 1; \
	done

fuzz-build:
	@scripts/install-deps.sh --fuzz
	@cmake -S . -B $(FUZZ_BUILD_DIR) -DPARITY_FUZZ=ON -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) \
	  -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build $(FUZZ_BUILD_DIR) -j$(JOBS)

fuzz: fuzz-build
	@fuzz/run-fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

sanitize-build: deps
	@cmake -S . -B $(SANITIZE_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARITY_SANITIZE=ON \
	  -DPARITY_BUILD_BENCH=OFF -DPARITY_WERROR=OFF >/dev/null
	@scripts/sanitize/run.sh cmake --build $(SANITIZE_BUILD_DIR) -j$(JOBS)

test-sanitize: sanitize-build
	@env $(SANITIZE_CPU_PATHS) scripts/sanitize/ctest.sh $(SANITIZE_BUILD_DIR) $(JOBS) \
	  $(SANITIZE_TIMEOUT)

clean:
	rm -rf $(BUILD_DIR)
