// What the training subcommands (ddp, pmap) share: where a run goes by default, the initial
// parameters it starts from, and the summary printed at the end.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>

#include "parity/common/case_spec.h"

namespace parity::cli {

// The options every training subcommand takes.
struct RunArguments {
  std::string case_name;
  std::vector<std::string> overrides;
  std::string init;
  std::string out;
  bool overwrite = false;
  bool quiet = false;
  bool verbose = false;
};

// Registers case, --set, --init, --out (default runs/CASE/PRODUCER-TIMESTAMP), --overwrite,
// --quiet and --verbose on `command`.
void add_run_options(CLI::App* command, RunArguments& arguments, const std::string& producer);

// runs/CASE/PRODUCER-TIMESTAMP
std::filesystem::path default_out_dir(const CaseSpec& spec, const std::string& producer);

// Creates `dir` and its parents when missing; InputError naming `dir` and the reason when that
// fails (a path that is a file, or under one; no permission), not std::filesystem_error.
void create_output_directory(const std::filesystem::path& dir);

// `init` when given; otherwise the case's own initial parameters (as `parity init` makes
// them), written into the run directory so that the run documents its start.
std::filesystem::path ensure_init_file(const CaseSpec& spec, const std::string& init,
                                       const std::filesystem::path& out_dir);

// A few lines a person reads at the end of a run, from the run directory itself.
void print_summary(const std::string& command, const std::filesystem::path& run_dir,
                   const std::string& placement);

}  // namespace parity::cli
