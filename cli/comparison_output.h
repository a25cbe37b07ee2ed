// What `parity compare` and `parity run` share: the tolerance options on the command line, and
// the end of a comparison (reports written, CI job summary appended, verdict printed).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "parity/common/directory_lock.h"
#include "parity/compare/compare.h"
#include "parity/compare/seed_sets.h"

namespace parity::cli {

struct ComparisonArguments {
  std::optional<double> loss_rtol, loss_atol, tensor_rtol, tensor_atol;
  std::optional<int64_t> allowed_bad_steps;
  bool require_same_case = false;
  bool fail_on_performance = false;
  bool no_color = false;
  // Comparisons over seeds (--seeds): the equivalence margins of the final values.
  std::optional<double> loss_margin, accuracy_margin;
};

// --loss-rtol, --loss-atol, --tensor-rtol, --tensor-atol, --allowed-bad-steps,
// --require-same-case, --fail-on-performance, --no-color, --loss-margin, --accuracy-margin.
void add_comparison_options(CLI::App* command, ComparisonArguments& arguments);
compare::CompareOptions comparison_options(const ComparisonArguments& arguments);
// The margins and --require-same-case; InputError naming the step-by-step options given
// (tolerances, --allowed-bad-steps, --fail-on-performance), which mean nothing over seeds.
compare::SeedSetOptions seed_set_options(const ComparisonArguments& arguments);

// Takes `dir`, the folder a comparison will write its reports into (--report), before it
// compares: locks it for as long as the returned lock lives (refused, naming the holder, while
// another parity process writes it or a folder above it, as a `parity run` does its
// OUT/CASE/report), refuses to replace reports there unless `overwrite` (and any that is a
// link), and removes the old reports, so that no earlier verdict outlives a comparison stopped
// half way. Null when `dir` is empty (no reports asked for).
std::unique_ptr<DirectoryLock> claim_report_folder(const std::filesystem::path& dir,
                                                   const std::string& command, bool overwrite);

// Writes the four reports into `report_dir` (when not empty), appends report.md to
// $GITHUB_STEP_SUMMARY when that is set, prints the verdict table (and the report's path) on
// stdout, and returns the verdict's exit code.
int finish_comparison(const compare::ComparisonResult& result,
                      const std::filesystem::path& report_dir, const ComparisonArguments& arguments);

}  // namespace parity::cli
