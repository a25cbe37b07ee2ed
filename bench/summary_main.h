// The main() of a suite that prints a summary after Google Benchmark's own table: runs the
// benchmarks through `Reporter` (a ConsoleReporter that also collects results) and returns
// what its finish() returns, so a failed cross-check fails the suite.
#pragma once

#include <benchmark/benchmark.h>

namespace parity::bench {

template <typename Reporter>
int run_with_summary(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.finish();
}

}  // namespace parity::bench
