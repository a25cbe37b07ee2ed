#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "mlp_program.h"
#include "parity/common/case_spec.h"
#include "parity/common/init_params.h"
#include "pmap_engine/ops.h"

namespace parity::cli {

void register_program_command(CLI::App& app) {
  struct Arguments {
    std::string case_name;
    std::vector<std::string> overrides;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* command = app.add_subcommand(
      "program",
      "Print a case's traced train step (forward, backward, update) like jax.make_jaxpr, with "
      "its op count and peak memory on one device");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--set", arguments->overrides, "override a case key: section.key=value");
  command->callback([arguments] {
    namespace pe = pmap_engine;
    CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    require_widths_model(spec, "parity program");
    const int64_t batch = spec.parallel.replicas * spec.data.per_replica_batch;
    const int64_t input_dim = spec.model.widths.front();
    pe::Tree params = cases::params_from_tensors(
        init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
    pe::Tree opt_state = cases::make_optimizer(spec.train).init(params);
    pe::Array x = pe::zeros({batch, input_dim});
    pe::Array y = spec.model.loss == "mse" ? pe::zeros({batch, spec.model.widths.back()})
                                           : pe::zeros({batch}, pe::DType::i32);
    pe::Jitted step = cases::make_train_step(spec);
    std::cout << step.program_text({params, opt_state, x, y});
    step({params, opt_state, x, y});
    const pe::ExecutionStats stats = step.last_execution();
    std::cout << fmt::format(
        "# case {}: train step on one device, global batch {}: {} ops, peak memory {} bytes "
        "({:.1f} MiB; measured by running the step once)\n",
        spec.name, batch, stats.num_ops, stats.peak_bytes,
        static_cast<double>(stats.peak_bytes) / (1 << 20));
  });
}

}  // namespace parity::cli
