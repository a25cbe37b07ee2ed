#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/common/error.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "process_options.h"
#include "producer_processes.h"
#include "run_output.h"

namespace parity::cli {

void register_pmap_command(CLI::App& app) {
  struct Arguments : RunArguments, ProcessArguments {
    std::string program;
    bool check_replicas = false;
    bool float64 = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "pmap",
      "Train a case with pmap_engine on parallel.replicas virtual devices (the samples each "
      "DDP rank gets) and write a run directory");
  add_run_options(command, *arguments, "pmap");
  command
      ->add_option(
          "--program", arguments->program,
          "the engine program inside the step (default: the case's "
          "scenario.engine_program, else pmean, DDP's average); psum is pitfall P2, "
          "psum-divide S2, psum-loss-in-grad P3 (psum-loss-in-grad-shard-map P3b, the same "
          "step under jax.shard_map), init-per-device P4")
      ->check(CLI::IsMember(engine_program_names()));
  command->add_flag("--check-replicas", arguments->check_replicas,
                    "verify every step that params and optimizer state are bit-identical on "
                    "all devices, naming the first divergent leaf and device (debug; P4, P11)");
  command->add_flag("--float64", arguments->float64,
                    "train in float64 (params, optimizer state, data, every op): the oracle run "
                    "for parity compare --oracle; run.json records dtype f64");
  add_process_options(command, *arguments,
                      "processes to spread the devices over, each joining the others as "
                      "jax.distributed.initialize does (default: the case's parallel.processes)",
                      "seconds a process may wait for the others (joining, every exchange)");
  command->callback([arguments] {
    // The engine trains the case with its scenario.engine_overrides (a process started by a
    // launcher gets the case already resolved; applying them again changes nothing).
    const CaseSpec spec = engine_case(load_case(arguments->case_name, arguments->overrides));
    engine_trainer::EngineOptions options;
    options.out_dir = arguments->out.empty() ? default_out_dir(spec, "pmap")
                                             : std::filesystem::path(arguments->out);
    options.overwrite = arguments->overwrite;
    options.timeout_seconds = arguments->timeout_seconds;
    options.quiet = arguments->quiet;
    options.verbose = arguments->verbose;
    options.step.check_replicas = arguments->check_replicas;
    options.step.float64 = arguments->float64;
    options.step.program =
        arguments->program.empty() ? spec.scenario.engine_program : arguments->program;
    options.init_file = ensure_init_file(spec, arguments->init, options.out_dir);
    // A process started by a launcher (train_engine below) trains its share of the devices.
    if (const auto place = engine_place_from_environment()) {
      engine_trainer::train(spec, options, place);
      // Process 0 writes the run directory; the others have nothing of their own to summarise.
      if (place->index == 0) {
        print_summary("parity pmap", options.out_dir,
                      fmt::format("{} devices", spec.parallel.replicas));
      }
      return;
    }
    const int64_t processes = arguments->nproc > 0 ? arguments->nproc : spec.parallel.processes;
    train_engine(spec, options, processes);
    print_summary("parity pmap", options.out_dir,
                  processes > 1
                      ? fmt::format("{} devices in {} processes", spec.parallel.replicas, processes)
                      : fmt::format("{} devices", spec.parallel.replicas));
  });
}

}  // namespace parity::cli
