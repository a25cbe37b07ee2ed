#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "process_options.h"
#include "producer_processes.h"
#include "run_output.h"

namespace parity::cli {
namespace {

struct DdpArguments : RunArguments, ProcessArguments {
  std::string inject_fault;
};

void run_ddp(const DdpArguments& arguments) {
  CaseSpec spec = load_case(arguments.case_name, arguments.overrides);
  ddp_ref::DdpOptions options;
  options.timeout_seconds = arguments.timeout_seconds;
  options.overwrite = arguments.overwrite;
  options.quiet = arguments.quiet;
  options.verbose = arguments.verbose;
  if (!arguments.inject_fault.empty()) {
    options.fault = ddp_ref::parse_fault_injection(arguments.inject_fault);
  }

  // A process started by torchrun (or by `--nproc` below) joins as its rank(s).
  if (const auto place = ddp_place_from_environment(spec)) {
    if (arguments.out.empty() || arguments.init.empty()) {
      throw InputError(
          "a process joining a multi-process run (RANK is set) needs --init FILE and --out DIR, "
          "the same on every rank");
    }
    options.init_file = arguments.init;
    options.out_dir = arguments.out;
    ddp_ref::train(spec, options, place);
    return;
  }

  options.out_dir =
      arguments.out.empty() ? default_out_dir(spec, "ddp") : std::filesystem::path(arguments.out);
  options.init_file = ensure_init_file(spec, arguments.init, options.out_dir);
  const int64_t processes = arguments.nproc > 0 ? arguments.nproc : spec.parallel.processes;
  if (processes > 1) {
    launch_ddp_processes(spec, options, processes);
    print_summary("parity ddp", options.out_dir, fmt::format("{} processes", processes));
    return;
  }
  ddp_ref::train(spec, options);
  print_summary("parity ddp", options.out_dir, "threads");
}

}  // namespace

void register_ddp_command(CLI::App& app) {
  auto arguments = std::make_shared<DdpArguments>();
  CLI::App* command = app.add_subcommand(
      "ddp", "Train a case with LibTorch DDP (c10d Reducer over Gloo) and write a run directory");
  add_run_options(command, *arguments, "ddp");
  add_process_options(command, *arguments,
                      "processes to spread the replicas over (default: the case's "
                      "parallel.processes); 1 runs every rank as a thread",
                      "seconds any rank waits for the others before failing (default 60)");
  command->add_option("--inject-fault", arguments->inject_fault,
                      "make RANK fail at STEP, to see how failures are reported: "
                      "RANK:STEP:throw|exit|nan");
  command->callback([arguments] { run_ddp(*arguments); });
}

}  // namespace parity::cli
