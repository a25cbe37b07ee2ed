#include <iostream>

#include "case_init.h"
#include "commands.h"
#include "output_options.h"
#include "parity/common/case_spec.h"
#include "parity/common/output_path.h"

namespace parity::cli {

void register_init_command(CLI::App& app) {
  struct Arguments {
    std::string case_name;
    std::string out;
    std::vector<std::string> overrides;
    bool overwrite = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "init",
      "Make a case's initial parameters once, by its init.scheme (jax-normal, flax, torch)");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--out", arguments->out, "safetensors file to write")
      ->required()
      ->check(output_name());
  command->add_option("--set", arguments->overrides, "override a case key: section.key=value");
  command->add_flag("--overwrite", arguments->overwrite, "replace the file when it exists");
  command->callback([arguments] {
    const CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    check_output_file(arguments->out, "--out", arguments->overwrite);
    write_init_file(arguments->out, spec);
    std::cout << arguments->out << "\n";
  });
}

}  // namespace parity::cli
