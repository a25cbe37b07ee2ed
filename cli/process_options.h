// What the training subcommands (ddp, pmap) take about their processes: how many to spread the
// case over, and how long one waits for the others. Each subcommand words the help for its
// producer.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace parity::cli {

struct ProcessArguments {
  int64_t nproc = 0;  // 0: the case's parallel.processes
  double timeout_seconds = 60;
};

// Registers --nproc (1 .. the most replicas a case may have) and --timeout (seconds, up to
// kMaxTimeoutSeconds) on `command`.
void add_process_options(CLI::App* command, ProcessArguments& arguments,
                         const std::string& nproc_help, const std::string& timeout_help);

}  // namespace parity::cli
