// parity: proves a training job migrated from PyTorch DDP to JAX pmap does the same thing.
//
// Exit codes: 0 success; 1 the run failed (a rank died, a value became non-finite) or the runs
// compared are not equivalent; 2 bad input (arguments, case files, data files); 3 (compare and
// run) a run compared is incomplete; 4 an internal error (a bug to report). Distinct codes let
// a CI gate tell "not equivalent" from "could not judge" from "parity itself broke".
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"
#include "parity/common/error.h"
#include "parity/common/termination.h"
#include "pmap_engine/dtype.h"
#include "rng_command.h"

int main(int argc, char** argv) {
  // Ctrl-C, SIGTERM and a dead launcher mark the runs being written incomplete before exit.
  parity::install_termination_handler();
  CLI::App app{"parity: check that a PyTorch DDP job and its JAX pmap port train the same way"};
  app.set_version_flag("--version", std::string("parity ") + PARITY_VERSION);
  app.require_subcommand(1);
  parity::cli::register_init_command(app);
  parity::cli::register_ddp_command(app);
  parity::cli::register_program_command(app);
  parity::cli::register_pmap_command(app);
  parity::cli::register_import_command(app);
  int exit_status = 0;
  parity::cli::register_compare_command(app, exit_status);
  parity::cli::register_run_command(app, exit_status);
  parity::cli::register_cases_command(app, exit_status);
  parity::cli::register_tensors_command(app, exit_status);
  parity::cli::register_gate_command(app, exit_status);
  register_rng_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  } catch (const parity::InputError& error) {
    std::cerr << "parity: error: " << error.what() << "\n";
    return 2;
  } catch (const parity::RunError& error) {
    std::cerr << "parity: run failed: " << error.what() << "\n";
    return 1;
  } catch (const pmap_engine::EngineError& error) {
    std::cerr << "parity: error: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "parity: internal error: " << error.what() << "\n";
    return 4;
  }
  return exit_status;
}
