// The main() of a suite that prints a summary after Google Benchmark's own table: runs the
// benchmarks through `Reporter` (a ConsoleReporter that also collects results) and returns
// what its finish() returns, so a failed cross-check fails the suite. `setup`, when given, runs
// after the command line is parsed and before any benchmark: it may register benchmarks and
// add context (benchmark::AddCustomContext).
#pragma once

#include <benchmark/benchmark.h>

#include <functional>

namespace parity::bench {

template <typename Reporter>
int run_with_summary(int argc, char** argv, const std::function<void()>& setup = {}) {
  benchmark::Initialize(&argc, argv);
  if (setup) setup();
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.finish();
}

}  // namespace parity::bench
