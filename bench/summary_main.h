// The main() of a suite that prints a summary after Google Benchmark's own table: runs the
// benchmarks through `Reporter` (a ConsoleReporter that also collects results) and returns
// what its finish() returns, so a failed cross-check fails the suite. `setup`, when given, runs
// after the command line is parsed and before any benchmark: it may register benchmarks and
// add context (benchmark::AddCustomContext). The reporter's targets() (target_summary.h) are
// printed, and written as JSON to the file --parity_summary_out=FILE names, each with the CPU
// they were measured on (cpu_info.h), which the context names too.
#pragma once

#include <benchmark/benchmark.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "cpu_info.h"
#include "target_summary.h"

namespace parity::bench {

// A suite's reporter: Google Benchmark's console table, plus the targets its finish() measured.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  const TargetSummary& targets() const { return targets_; }

 protected:
  TargetSummary targets_;
};

template <typename Reporter>
int run_with_summary(int argc, char** argv, const std::function<void()>& setup = {}) {
  // Ours first: benchmark::Initialize reports flags it does not know.
  constexpr const char* kSummaryFlag = "--parity_summary_out=";
  std::string summary_out;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kSummaryFlag, std::strlen(kSummaryFlag)) == 0) {
      summary_out = argv[i] + std::strlen(kSummaryFlag);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  const CpuInfo cpu = cpu_info();
  benchmark::AddCustomContext("cpu_model", cpu.model);
  benchmark::AddCustomContext("cpu_isa", cpu.isa);
  if (setup) setup();
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const int status = reporter.finish();
  const std::string cpu_line = cpu_summary_line();
  reporter.targets().print(std::cout, cpu_line);
  if (!summary_out.empty()) reporter.targets().write_json(summary_out, cpu_line);
  return status;
}

}  // namespace parity::bench
