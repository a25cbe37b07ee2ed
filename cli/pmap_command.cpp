#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "pmap_processes.h"
#include "pmap_trainer.h"
#include "numeric_options.h"
#include "run_output.h"

namespace parity::cli {

void register_pmap_command(CLI::App& app) {
  struct Arguments : RunArguments {
    std::string program;
    bool check_replicas = false;
    bool float64 = false;
    int64_t nproc = 0;
    double timeout_seconds = 60;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "pmap",
      "Train a case with pmap_engine on parallel.replicas virtual devices (the samples each "
      "DDP rank gets) and write a run directory");
  add_run_options(command, *arguments, "pmap");
  command
      ->add_option("--program", arguments->program,
                   "the engine program inside the step (default: the case's "
                   "scenario.engine_program, else pmean, DDP's average); psum is pitfall P2, "
                   "psum-divide S2, psum-loss-in-grad P3, init-per-device P4")
      ->check(CLI::IsMember(engine_program_names()));
  command->add_flag("--check-replicas", arguments->check_replicas,
                    "verify every step that params and optimizer state are bit-identical on "
                    "all devices, naming the first divergent leaf and device (debug; P4, P11)");
  command->add_flag("--float64", arguments->float64,
                    "train in float64 (params, optimizer state, data, every op): the oracle run "
                    "for parity compare --oracle; run.json records dtype f64");
  command
      ->add_option("--nproc", arguments->nproc,
                   "processes to spread the devices over, each joining the others as "
                   "jax.distributed.initialize does (default: the case's parallel.processes)")
      ->check(integer_in(1, kMaxCaseReplicas));
  command
      ->add_option("--timeout", arguments->timeout_seconds,
                   "seconds a process may wait for the others (joining, every exchange)")
      ->check(positive_number(kMaxTimeoutSeconds));
  command->callback([arguments] {
    CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    cases::PmapRunOptions options;
    options.out_dir = arguments->out.empty() ? default_out_dir(spec, "pmap")
                                             : std::filesystem::path(arguments->out);
    options.init_file = ensure_init_file(spec, arguments->init, options.out_dir);
    options.overwrite = arguments->overwrite;
    options.timeout_seconds = arguments->timeout_seconds;
    options.quiet = arguments->quiet;
    options.step.check_replicas = arguments->check_replicas;
    options.step.float64 = arguments->float64;
    options.step.program =
        arguments->program.empty() ? spec.scenario.engine_program : arguments->program;
    const int64_t processes = arguments->nproc > 0 ? arguments->nproc : spec.parallel.processes;
    if (processes > 1 && !cases::pmap_process_from_environment()) {
      if (processes != spec.parallel.processes) {
        throw InputError(
            fmt::format("--nproc {}: the case says parallel.processes = {}; use "
                        "--set parallel.processes={} to change it",
                        processes, spec.parallel.processes, processes));
      }
      std::vector<std::string> child = {
          "pmap",   arguments->case_name,     "--init",    options.init_file.string(),
          "--out",  options.out_dir.string(), "--program", options.step.program,
          "--quiet"};
      for (const std::string& override_text : arguments->overrides) {
        child.insert(child.end(), {"--set", override_text});
      }
      if (arguments->overwrite) child.push_back("--overwrite");
      if (arguments->float64) child.push_back("--float64");
      if (arguments->check_replicas) child.push_back("--check-replicas");
      child.insert(child.end(), {"--timeout", fmt::format("{}", arguments->timeout_seconds)});
      cases::launch_pmap_processes(processes, "/proc/self/exe", child, arguments->timeout_seconds,
                                   options.out_dir);
      print_summary("parity pmap", options.out_dir,
                    fmt::format("{} devices in {} processes", spec.parallel.replicas, processes));
      return;
    }
    cases::run_pmap(spec, options);
    // Process 0 writes the run directory; the others have nothing of their own to summarise.
    if (const auto process = cases::pmap_process_from_environment();
        process && process->index != 0) {
      return;
    }
    print_summary("parity pmap", options.out_dir,
                  fmt::format("{} devices", spec.parallel.replicas));
  });
}

}  // namespace parity::cli
