// parity import metrics SRC --case CASE --out DIR --map loss=TAG ...: a real training script's
// logged metrics as a run directory (interop/metrics_import.h).
#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/interop/metrics_import.h"

namespace parity::cli {

void register_import_command(CLI::App& app) {
  struct Arguments {
    std::string source;
    std::string case_name;
    std::vector<std::string> overrides;
    std::string out;
    std::vector<std::string> maps;
    std::string format = "auto";
    bool overwrite = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* import = app.add_subcommand(
      "import", "Turn what real PyTorch or JAX training scripts logged into a run directory");
  import->require_subcommand(1);
  CLI::App* metrics = import->add_subcommand(
      "metrics",
      "Metrics from TensorBoard event files (PyTorch's SummaryWriter, TensorFlow, Flax/CLU), "
      "JSON Lines or CSV, mapped onto loss / grad_norm / param_norm / lr per step");
  metrics
      ->add_option("source", arguments->source,
                   "an events.out.tfevents.* file or a directory of them, a .jsonl or a .csv")
      ->required();
  metrics
      ->add_option("--case", arguments->case_name,
                   "the case the run trained (its name or TOML file): the run directory "
                   "records its hash so that compare pairs it with runs of the same case")
      ->required();
  metrics->add_option("--set", arguments->overrides, "override a case key, as the run did");
  metrics->add_option("--out", arguments->out, "the run directory to write")->required();
  metrics
      ->add_option("--map", arguments->maps,
                   "METRIC=NAME: which logged name is the run's loss (required), grad_norm, "
                   "param_norm or lr, e.g. --map loss=train/loss")
      ->required();
  metrics->add_option("--format", arguments->format, "auto (by file name), tfevents, jsonl, csv")
      ->check(CLI::IsMember({"auto", "tfevents", "jsonl", "csv"}));
  metrics->add_flag("--overwrite", arguments->overwrite, "replace a run directory already there");
  metrics->callback([arguments] {
    interop::MetricsImport request;
    request.source = arguments->source;
    request.out_dir = arguments->out;
    request.overwrite = arguments->overwrite;
    const std::map<std::string, interop::MetricsFormat> formats = {
        {"auto", interop::MetricsFormat::kAuto},
        {"tfevents", interop::MetricsFormat::kTfEvents},
        {"jsonl", interop::MetricsFormat::kJsonLines},
        {"csv", interop::MetricsFormat::kCsv}};
    request.format = formats.at(arguments->format);
    for (const std::string& map : arguments->maps) {
      const size_t equals = map.find('=');
      if (equals == std::string::npos || equals == 0 || equals + 1 == map.size()) {
        throw InputError(fmt::format("--map {}: expected METRIC=NAME, e.g. loss=train/loss", map));
      }
      request.mapping[map.substr(0, equals)] = map.substr(equals + 1);
    }
    const CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    const interop::ImportSummary summary = interop::import_metrics(spec, request);
    std::cout << fmt::format("parity import metrics: {} steps of case {} from {} ({}) -> {}\n",
                             summary.steps, spec.name, request.source.string(), summary.producer,
                             request.out_dir.string());
  });
}

}  // namespace parity::cli
