// parity import metrics SRC --case CASE --out DIR --map loss=TAG ...: a real training script's
// logged metrics as a run directory (interop/metrics_import.h).
// parity import tensors SRC --case CASE --out DIR: its saved gradients and parameters, in
// PyTorch's or Flax's names, as that run directory's recorded steps (interop/tensor_import.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <optional>

#include "commands.h"
#include "numeric_options.h"
#include "output_options.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/interop/metrics_import.h"
#include "parity/interop/tensor_import.h"

namespace parity::cli {

namespace {

void register_import_tensors(CLI::App& import) {
  struct Arguments {
    std::string source;
    std::string case_name;
    std::vector<std::string> overrides;
    std::string out;
    std::optional<int64_t> step;
    std::string kind = "from-names";
    std::string naming = "auto";
    bool overwrite = false;
  };
  auto arguments = std::make_shared<Arguments>();
  CLI::App* tensors = import.add_subcommand(
      "tensors",
      "Gradients and parameters saved as safetensors, .npz or .npy in PyTorch's or Flax's names "
      "and layouts, mapped onto the case's canonical names as the run's recorded steps");
  tensors
      ->add_option("source", arguments->source,
                   "a tensor file, or a directory of step_NNNNNN.safetensors / .npz files (what "
                   "interop/python's helpers write under tensors/)")
      ->required();
  tensors->add_option("--case", arguments->case_name, "the case the run trained")->required();
  tensors->add_option("--set", arguments->overrides, "override a case key, as the run did");
  tensors
      ->add_option("--out", arguments->out,
                   "the run directory (of the same case) to add the tensors to; `parity import "
                   "metrics` makes it")
      ->required()
      ->check(output_name());
  tensors->add_option("--step", arguments->step, "the step a single file was saved at")
      ->check(integer_in(0, kMaxCaseSteps - 1));
  tensors
      ->add_option("--kind", arguments->kind,
                   "from-names: the file holds params/... and grads/... tensors; params or grads: "
                   "the whole file is that")
      ->check(CLI::IsMember({"from-names", "params", "grads"}));
  tensors
      ->add_option("--naming", arguments->naming,
                   "auto (by the leaf names), torch (Linear weight (out, in)...) or flax (Dense "
                   "kernel (in, out)...; parity's canonical names read as Flax's)")
      ->check(CLI::IsMember({"auto", "torch", "flax"}));
  tensors->add_flag("--overwrite", arguments->overwrite,
                    "replace tensors the run already recorded under the same names");
  tensors->callback([arguments] {
    interop::TensorImport request;
    request.source = arguments->source;
    request.run_dir = arguments->out;
    request.step = arguments->step;
    request.overwrite = arguments->overwrite;
    request.naming = interop::param_naming_from_name(arguments->naming);
    const std::map<std::string, interop::TensorGroups> kinds = {
        {"from-names", interop::TensorGroups::kFromPrefixes},
        {"params", interop::TensorGroups::kParams},
        {"grads", interop::TensorGroups::kGrads}};
    request.groups = kinds.at(arguments->kind);
    const CaseSpec spec = load_case(arguments->case_name, arguments->overrides);
    const interop::TensorImportSummary summary = interop::import_tensors(spec, request);
    std::cout << fmt::format(
        "parity import tensors: {} tensors at steps {} of case {}, read as {} names -> {}\n",
        summary.num_tensors, fmt::join(summary.steps, ", "), spec.name,
        interop::param_naming_name(summary.naming), request.run_dir.string());
    for (const interop::NameMapping& mapping : summary.mappings) {
      std::cout << "  " << interop::describe_mapping(mapping) << "\n";
    }
  });
}

}  // namespace

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
  metrics->add_option("--out", arguments->out, "the run directory to write")
      ->required()
      ->check(output_name());
  metrics
      ->add_option("--map", arguments->maps,
                   "METRIC=NAME: which logged name is the run's loss (required), grad_norm, "
                   "param_norm, lr or step_seconds (each step's wall time, which parity gate "
                   "judges speed by), e.g. --map loss=train/loss; test_loss and test_accuracy: "
                   "the run's final evaluation (the last value logged), which parity compare "
                   "--seeds judges")
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
    const std::string draws =
        summary.dropout_draws > 0
            ? fmt::format(" and {} dropout masks (rng.jsonl)", summary.dropout_draws)
            : "";
    std::cout << fmt::format("parity import metrics: {} steps{} of case {} from {} ({}) -> {}\n",
                             summary.steps, draws, spec.name, request.source.string(),
                             summary.producer, request.out_dir.string());
  });
  register_import_tensors(*import);
}

}  // namespace parity::cli
