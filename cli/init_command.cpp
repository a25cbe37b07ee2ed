#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/init_params.h"
#include "parity/common/tensor_file.h"

namespace parity::cli {

void register_init_command(CLI::App& app) {
  struct Arguments {
    std::string case_name;
    std::string out;
    std::vector<std::string> overrides;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "init", "Make a case's initial parameters once (JAX's scheme: normal(split(key)) * scale)");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--out", arguments->out, "safetensors file to write")->required();
  command->add_option("--set", arguments->overrides, "override a case key: section.key=value");
  command->callback([arguments] {
    CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    NamedTensors params = init_model_params(spec);
    write_safetensors(arguments->out, params,
                      {{"case", spec.name},
                       {"scheme", spec.init.scheme},
                       {"seed", std::to_string(spec.init.seed)},
                       {"scale", fmt::format("{}", spec.init.scale)}});
    std::cout << arguments->out << "\n";
  });
}

}  // namespace parity::cli
