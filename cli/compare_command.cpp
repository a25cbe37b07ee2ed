#include "commands.h"
#include "comparison_output.h"
#include "parity/common/run_dir.h"

namespace parity::cli {

void register_compare_command(CLI::App& app, int& exit_status) {
  struct Arguments : ComparisonArguments {
    std::string run_a, run_b, report, oracle;
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
  command->add_option("--oracle", arguments->oracle,
                      "a higher-precision run of the same case (parity pmap CASE --float64): "
                      "each run's loss error against it separates float noise from divergence");
  add_comparison_options(command, *arguments);
  command->callback([arguments, &exit_status] {
    compare::CompareOptions options = comparison_options(*arguments);
    std::optional<RunDir> oracle;
    if (!arguments->oracle.empty()) oracle = read_run_dir(arguments->oracle);
    options.oracle = oracle ? &*oracle : nullptr;
    const compare::ComparisonResult result =
        compare::compare_run_dirs(arguments->run_a, arguments->run_b, options);
    exit_status = finish_comparison(result, arguments->report, *arguments);
  });
}

}  // namespace parity::cli
