#include "commands.h"
#include "comparison_output.h"

namespace parity::cli {

void register_compare_command(CLI::App& app, int& exit_status) {
  struct Arguments : ComparisonArguments {
    std::string run_a, run_b, report;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Judge two run directories step by step (A under test, B the reference) and name the "
      "likely cause of a divergence. Exit 0 equivalent, 1 not equivalent, 2 bad input, 3 a run "
      "is incomplete");
  command->add_option("run_a", arguments->run_a, "run directory under test (e.g. the pmap run)")
      ->required();
  command->add_option("run_b", arguments->run_b, "reference run directory (e.g. the DDP run)")
      ->required();
  command->add_option("--report", arguments->report,
                      "write report.html, report.md, report.json and junit.xml into this folder");
  add_comparison_options(command, *arguments);
  command->callback([arguments, &exit_status] {
    const compare::ComparisonResult result = compare::compare_run_dirs(
        arguments->run_a, arguments->run_b, comparison_options(*arguments));
    exit_status = finish_comparison(result, arguments->report, *arguments);
  });
}

}  // namespace parity::cli
