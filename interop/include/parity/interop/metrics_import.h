// Metrics that real training scripts log, as one series per name: TensorBoard event files
// (tf_events.h), JSON Lines (one object per line with a "step" and numbers) and CSV (a header
// row naming a "step" column and the metric columns). `parity import metrics` maps them onto a
// run directory's per-step metrics (loss, grad_norm, param_norm, lr) so that compare can judge
// a real PyTorch or JAX run like the project's own producers' runs.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "parity/common/case_spec.h"

namespace parity::interop {

// name -> step -> value, steps ascending.
using MetricSeries = std::map<std::string, std::map<int64_t, double>>;

enum class MetricsFormat { kAuto, kTfEvents, kJsonLines, kCsv };

// Reads `path`. kAuto picks by name: events.out.tfevents.* (or a directory holding such files,
// read in name order), *.jsonl / *.ndjson, *.csv. Throws InputError naming the file and the line
// (or record and byte) for anything it cannot read, and for a step logged twice for one name
// with different values.
MetricSeries read_metrics(const std::filesystem::path& path, MetricsFormat format);

struct MetricsImport {
  std::filesystem::path source;
  MetricsFormat format = MetricsFormat::kAuto;
  // Run-directory metric -> source name: {"loss": "train/loss"}. "loss" is required; the others
  // (grad_norm, param_norm, lr, step_seconds per step; test_loss, test_accuracy, whose last
  // logged value is the run's result) are optional. The last logged loss is the run's
  // final_loss; step_seconds also gives run.json's timings (and parity gate its step times).
  std::map<std::string, std::string> mapping;
  std::filesystem::path out_dir;
  bool overwrite = false;
};

struct ImportSummary {
  int64_t steps = 0;
  std::string producer;  // "import:tensorboard", "import:jsonl", "import:csv"
  int64_t dropout_draws = 0;  // rng.jsonl lines carried (read_logged_draws)
};

// Writes a run directory for `spec` (its hash, so that compare pairs it with runs of the same
// case) with one step per logged loss step. JSON Lines written in the run directory's own
// format (interop/python's helpers) also carry their replica_losses, samples_digest,
// samples_set_digest and duplicate_samples into it. The dropout draws the helpers log beside the
// metrics (rng.jsonl in the source's folder) become the run's RNG streams. Throws InputError
// listing the source's names when a mapped name is missing, and before anything is written.
ImportSummary import_metrics(const CaseSpec& spec, const MetricsImport& request);

}  // namespace parity::interop
