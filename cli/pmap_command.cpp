#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "pmap_trainer.h"
#include "run_output.h"

namespace parity::cli {

void register_pmap_command(CLI::App& app) {
  struct Arguments {
    std::string case_name;
    std::vector<std::string> overrides;
    std::string init;
    std::string out;
    std::string reduction = "pmean";
    bool overwrite = false;
    bool quiet = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "pmap",
      "Train a case with pmap_engine on parallel.replicas virtual devices (the samples each "
      "DDP rank gets) and write a run directory");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--set", arguments->overrides,
                      "override a case key, e.g. --set train.steps=50 (repeatable)");
  command->add_option("--init", arguments->init,
                      "initial parameters (safetensors); default: made with `parity init` "
                      "into the run directory");
  command->add_option("--out", arguments->out,
                      "run directory to write; default: runs/CASE/pmap-TIMESTAMP");
  command
      ->add_option("--grad-reduction", arguments->reduction,
                   "how the step combines gradients: pmean (DDP's average) or psum "
                   "(pitfall P2: the sum)")
      ->check(CLI::IsMember({"pmean", "psum"}));
  command->add_flag("--overwrite", arguments->overwrite, "replace an existing run directory");
  command->add_flag("--quiet", arguments->quiet, "no progress lines on stderr");
  command->callback([arguments] {
    CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    cases::PmapRunOptions options;
    options.out_dir = arguments->out.empty() ? default_out_dir(spec, "pmap")
                                             : std::filesystem::path(arguments->out);
    options.init_file = ensure_init_file(spec, arguments->init, options.out_dir);
    options.overwrite = arguments->overwrite;
    options.quiet = arguments->quiet;
    options.reduction = arguments->reduction == "psum" ? cases::GradientReduction::kSum
                                                       : cases::GradientReduction::kMean;
    cases::run_pmap(spec, options);
    print_summary("parity pmap", options.out_dir,
                  fmt::format("{} devices", spec.parallel.replicas));
  });
}

}  // namespace parity::cli
