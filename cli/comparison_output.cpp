#include "comparison_output.h"

#include <unistd.h>

#include <fmt/format.h>

#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "numeric_options.h"
#include "parity/common/error.h"
#include "parity/reports/reports.h"

namespace parity::cli {

void add_comparison_options(CLI::App* command, ComparisonArguments& arguments) {
  command
      ->add_option("--loss-rtol", arguments.loss_rtol,
                   "relative tolerance of the loss curve (default by dtype; docs/comparing.md)")
      ->check(non_negative_number());
  command->add_option("--loss-atol", arguments.loss_atol, "absolute tolerance of the loss curve")
      ->check(non_negative_number());
  command
      ->add_option("--tensor-rtol", arguments.tensor_rtol,
                   "relative tolerance of gradients and parameters")
      ->check(non_negative_number());
  command
      ->add_option("--tensor-atol", arguments.tensor_atol,
                   "absolute tolerance of gradients and parameters")
      ->check(non_negative_number());
  command
      ->add_option("--allowed-bad-steps", arguments.allowed_bad_steps,
                   "loss steps allowed outside the tolerance (the approximate lane)")
      ->check(integer_in(0, kMaxCaseSteps));
  command->add_flag("--require-same-case", arguments.require_same_case,
                    "fail when the two runs' cases differ (default: a warning)");
  command->add_flag("--fail-on-performance", arguments.fail_on_performance,
                    "fail when throughput or memory is worse than the reference by more than "
                    "the warning ratios (default: a warning)");
  command->add_flag("--no-color", arguments.no_color, "no ANSI colours in the verdict table");
  command
      ->add_option("--loss-margin", arguments.loss_margin,
                   "with --seeds: the equivalence margin of the test (or final) loss, in its own "
                   "units (default: the case's compare.seeds_loss_margin, 0.02)")
      ->check(number_in(0, std::numeric_limits<double>::infinity(), true));
  command
      ->add_option("--accuracy-margin", arguments.accuracy_margin,
                   "with --seeds: the equivalence margin of the test accuracy, a fraction "
                   "(default: the case's compare.seeds_accuracy_margin, 0.01)")
      ->check(positive_number(1.0));
}

compare::CompareOptions comparison_options(const ComparisonArguments& arguments) {
  compare::CompareOptions options;
  options.loss_rtol = arguments.loss_rtol;
  options.loss_atol = arguments.loss_atol;
  options.tensor_rtol = arguments.tensor_rtol;
  options.tensor_atol = arguments.tensor_atol;
  options.allowed_bad_steps = arguments.allowed_bad_steps;
  options.require_same_case = arguments.require_same_case;
  options.fail_on_performance = arguments.fail_on_performance;
  return options;
}

compare::SeedSetOptions seed_set_options(const ComparisonArguments& arguments) {
  // Over seeds only final values are judged: a step-by-step option would be silently ignored.
  std::vector<std::string> step_options;
  if (arguments.loss_rtol) step_options.push_back("--loss-rtol");
  if (arguments.loss_atol) step_options.push_back("--loss-atol");
  if (arguments.tensor_rtol) step_options.push_back("--tensor-rtol");
  if (arguments.tensor_atol) step_options.push_back("--tensor-atol");
  if (arguments.allowed_bad_steps) step_options.push_back("--allowed-bad-steps");
  if (arguments.fail_on_performance) step_options.push_back("--fail-on-performance");
  if (!step_options.empty()) {
    throw InputError(fmt::format(
        "{} judge{} runs step by step, which --seeds does not: over seeds the final test loss "
        "and accuracy are judged, and --seeds takes --loss-margin, --accuracy-margin, "
        "--require-same-case, --report and --no-color; drop {}, or judge one pair of runs step "
        "by step (without --seeds)",
        fmt::join(step_options, ", "), step_options.size() == 1 ? "s" : "",
        step_options.size() == 1 ? "it" : "them"));
  }
  compare::SeedSetOptions options;
  options.loss_margin = arguments.loss_margin;
  options.accuracy_margin = arguments.accuracy_margin;
  options.require_same_case = arguments.require_same_case;
  return options;
}

std::unique_ptr<DirectoryLock> claim_report_folder(const std::filesystem::path& dir,
                                                   const std::string& command, bool overwrite) {
  if (dir.empty()) return nullptr;
  auto lock = std::make_unique<DirectoryLock>(dir, command);
  reports::check_report_files(dir, "--report", overwrite);
  reports::remove_reports(dir);
  return lock;
}

int finish_comparison(const compare::ComparisonResult& result,
                      const std::filesystem::path& report_dir,
                      const ComparisonArguments& arguments) {
  if (!report_dir.empty()) reports::write_reports(result, report_dir);
  reports::append_github_step_summary(
      reports::render_markdown(result),
      report_dir.empty() ? std::filesystem::path(reports::kHtmlFile)
                         : report_dir / reports::kHtmlFile);
  const bool color = !arguments.no_color && isatty(STDOUT_FILENO) != 0;
  std::cout << reports::render_terminal_summary(result, color);
  if (!report_dir.empty()) {
    std::cout << "report: " << (report_dir / reports::kHtmlFile).string() << "\n";
  }
  return compare::exit_code(result.verdict);
}

}  // namespace parity::cli
