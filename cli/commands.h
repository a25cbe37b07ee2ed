// Each `parity` subcommand registers itself on the root CLI11 app. Subcommands only parse
// arguments and call the libraries; main.cpp turns exceptions into exit codes.
#pragma once

#include <CLI/CLI.hpp>

namespace parity::cli {

void register_init_command(CLI::App& app);
void register_ddp_command(CLI::App& app);
void register_program_command(CLI::App& app);
void register_pmap_command(CLI::App& app);
void register_import_command(CLI::App& app);
// Commands whose exit status is a verdict set it in `exit_status` (main returns it).
void register_compare_command(CLI::App& app, int& exit_status);
void register_run_command(CLI::App& app, int& exit_status);
void register_cases_command(CLI::App& app, int& exit_status);
void register_tensors_command(CLI::App& app, int& exit_status);
void register_gate_command(CLI::App& app, int& exit_status);

}  // namespace parity::cli
