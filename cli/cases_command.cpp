#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"

namespace parity::cli {

void register_cases_command(CLI::App& app) {
  CLI::App* cases = app.add_subcommand("cases", "The scenarios parity reproduces");
  cases->require_subcommand(1);
  CLI::App* list = cases->add_subcommand("list", "List the case files in the cases folder");
  list->callback([] {
    std::vector<CaseSpec> specs = list_cases();
    std::cout << fmt::format("{:<20} {:>8} {:>6}  {}\n", "case", "replicas", "steps",
                             "description");
    for (const auto& spec : specs) {
      std::string summary = spec.description.substr(0, spec.description.find('\n'));
      std::cout << fmt::format("{:<20} {:>8} {:>6}  {}\n", spec.name, spec.parallel.replicas,
                               spec.train.steps, summary);
    }
    std::cout << fmt::format("({} cases in {})\n", specs.size(), cases_dir().string());
  });
}

}  // namespace parity::cli
