// metrics.jsonl: one compact object per step: step, loss, replica_losses, grad_norm,
// param_norm, lr, step_seconds, samples_digest, and samples_set_digest, duplicate_samples,
// replica_samples and replicas (fewer than run.json's trained the step) only when the producer
// recorded them. Each line is flushed as soon as it is written, so a killed producer leaves at
// most one truncated last line. Schema 2 lines, without "replicas", are still read.
#include "metrics_jsonl.h"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "parity/common/error.h"

namespace parity {
namespace {

StepMetrics step_metrics_from_json(const Json& line, const std::string& where) {
  const ObjectReader reader = expect_object(line, where);
  StepMetrics metrics;
  metrics.step = reader.integer("step");
  metrics.loss = reader.number("loss");
  metrics.replica_losses = reader.numbers("replica_losses");
  metrics.grad_norm = reader.number("grad_norm");
  metrics.param_norm = reader.number("param_norm");
  metrics.lr = reader.number("lr");
  metrics.step_seconds = reader.number("step_seconds");
  metrics.samples_digest = reader.string("samples_digest");
  if (reader.has("duplicate_samples")) {
    metrics.duplicate_samples = reader.integer("duplicate_samples");
  }
  if (reader.has("samples_set_digest")) {
    metrics.samples_set_digest = reader.string("samples_set_digest");
  }
  if (reader.has("replica_samples")) metrics.replica_samples = reader.strings("replica_samples");
  if (reader.has("replicas")) metrics.replicas = reader.integer("replicas");
  return metrics;
}

// One loss per replica that trained the step: run.json's replicas, or the line's own "replicas"
// where fewer did (a run resumed on fewer devices: case S10). None is legitimate too: a jit over
// the global batch has no replica losses, nor has an import that did not log them. Schema 1 and
// 2 lines name no replicas, so there fewer than run.json's are taken for such a resume.
void check_replica_losses(const StepMetrics& metrics, const RunInfo& info,
                          const std::string& where) {
  const auto losses = static_cast<int64_t>(metrics.replica_losses.size());
  if (metrics.replicas && (*metrics.replicas < 1 || *metrics.replicas > info.replicas)) {
    throw InputError(fmt::format(
        "{}: \"replicas\": {} is not between 1 and run.json's {} replicas; the file is damaged: "
        "rerun the producer",
        where, *metrics.replicas, info.replicas));
  }
  const int64_t trained = metrics.replicas.value_or(info.replicas);
  const bool legacy_resume = info.schema_version < 3 && losses < trained;
  if (losses == 0 || losses == trained || legacy_resume) return;
  throw InputError(fmt::format(
      "{}: \"replica_losses\" has {} values but {} {} replicas; a line holds one loss per "
      "replica (a run resumed on fewer devices says so with the line's \"replicas\"); the file "
      "is damaged or belongs to another run: rerun the producer",
      where, losses, metrics.replicas ? "the line says" : "run.json says", trained));
}

}  // namespace

Json step_metrics_to_json(const StepMetrics& metrics) {
  Json line;
  line["step"] = metrics.step;
  line["loss"] = number_to_json(metrics.loss);
  line["replica_losses"] = numbers_to_json(metrics.replica_losses);
  line["grad_norm"] = number_to_json(metrics.grad_norm);
  line["param_norm"] = number_to_json(metrics.param_norm);
  line["lr"] = number_to_json(metrics.lr);
  line["step_seconds"] = number_to_json(metrics.step_seconds);
  line["samples_digest"] = metrics.samples_digest;
  if (!metrics.samples_set_digest.empty()) line["samples_set_digest"] = metrics.samples_set_digest;
  if (metrics.duplicate_samples) line["duplicate_samples"] = *metrics.duplicate_samples;
  if (!metrics.replica_samples.empty()) line["replica_samples"] = metrics.replica_samples;
  if (metrics.replicas) line["replicas"] = *metrics.replicas;
  return line;
}

std::vector<StepMetrics> read_metrics(const std::filesystem::path& path, const RunInfo& info,
                                      bool being_written) {
  std::vector<StepMetrics> steps;
  for_each_json_line(path, being_written, [&](const Json& line, const std::string& where) {
    StepMetrics metrics = step_metrics_from_json(line, where);
    check_replica_losses(metrics, info, where);
    if (metrics.step < 0) {
      throw InputError(where + ": step " + std::to_string(metrics.step) + " is negative");
    }
    if (!steps.empty() && metrics.step <= steps.back().step) {
      throw InputError(where + ": step " + std::to_string(metrics.step) +
                       " does not increase (the line before has step " +
                       std::to_string(steps.back().step) + "); steps must be strictly increasing");
    }
    steps.push_back(std::move(metrics));
  });
  return steps;
}

}  // namespace parity
