// Run directory writer and reader (schema 3; schema 1, without "steps", and 2, without the
// lines' "replicas", are still read). Files, as written here:
//
//   run.json       {"format": "parity-run", "schema_version": 3, "producer", "status", "failure",
//                   "case": {"name", "hash", "toml"}, "replicas", "processes", "steps" (optional),
//                   "dtype", "optimizer", "seed", "versions": {name: version}, "host",
//                   "started_at", "timings": {"setup_seconds", "first_step_seconds",
//                               "steady_step_median_seconds", "steady_step_spread_seconds",
//                               "steady_steps"},
//                   "memory": {"peak_bytes_per_replica": [...], "method",
//                              "param_bytes_per_replica", "optimizer_state_bytes_per_replica",
//                              "state_layout" (these three optional)},
//                   "parallel_style" (optional),
//                   "results": {name: number}}
//                  Replaced atomically (temp file + rename), so a reader never sees half of it.
//   metrics.jsonl  one compact object per step: step, loss, replica_losses, grad_norm,
//                  param_norm, lr, step_seconds, samples_digest, and samples_set_digest,
//                  duplicate_samples, replica_samples and replicas (fewer than run.json's trained
//                  the step) only when the producer recorded them. Each
//                  line is flushed as soon as it is written, so a killed producer leaves at most
//                  one truncated last line.
//   tensors/       step_NNNNNN.safetensors and, for a layers model at its first record step,
//                  intermediates_NNNNNN.safetensors (write_safetensors, itself atomic).
//
// Non-finite numbers are written as the strings "NaN", "Infinity", "-Infinity" (json_fields.h).
#include "parity/common/run_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "parity/common/error.h"
#include "parity/common/output_path.h"
#include "json_fields.h"
#include "run_dir_promises.h"
#include "parity/common/rng_streams.h"
#include "parity/common/tensor_file.h"
#include "parity/common/utc_timestamp.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRunFormat = "parity-run";
constexpr const char* kRunJson = "run.json";
constexpr const char* kMetricsJsonl = "metrics.jsonl";
constexpr const char* kTensorsDir = "tensors";
constexpr const char* kStepTensorsPrefix = "step_";
constexpr const char* kIntermediatesPrefix = "intermediates_";

// ---------------------------------------------------------------------------------------------
// RunInfo <-> JSON.

Json run_info_to_json(const RunInfo& info) {
  Json timings = {
      {"setup_seconds", number_to_json(info.timings.setup_seconds)},
      {"first_step_seconds", number_to_json(info.timings.first_step_seconds)},
      {"steady_step_median_seconds", number_to_json(info.timings.steady_step_median_seconds)},
      {"steady_step_spread_seconds", number_to_json(info.timings.steady_step_spread_seconds)},
      {"steady_steps", info.timings.steady_steps},
  };
  Json memory = {
      {"peak_bytes_per_replica", info.memory.peak_bytes_per_replica},
      {"method", info.memory.method},
  };
  if (!info.memory.param_bytes_per_replica.empty()) {
    memory["param_bytes_per_replica"] = info.memory.param_bytes_per_replica;
    memory["optimizer_state_bytes_per_replica"] = info.memory.optimizer_state_bytes_per_replica;
    memory["state_layout"] = info.memory.state_layout;
  }
  Json versions = Json::object();
  for (const auto& [name, version] : info.versions) versions[name] = version;
  Json results = Json::object();
  for (const auto& [name, value] : info.results) results[name] = number_to_json(value);

  Json run;
  run["format"] = kRunFormat;
  run["schema_version"] = kRunSchemaVersion;
  run["producer"] = info.producer;
  run["status"] = info.status;
  run["failure"] = info.failure;
  run["case"] = {{"name", info.case_name}, {"hash", info.case_hash}, {"toml", info.case_toml}};
  run["replicas"] = info.replicas;
  run["processes"] = info.processes;
  if (!info.parallel_style.empty()) run["parallel_style"] = info.parallel_style;
  if (info.steps >= 0) run["steps"] = info.steps;
  run["dtype"] = info.dtype;
  run["optimizer"] = info.optimizer;
  run["seed"] = info.seed;
  run["versions"] = versions;
  run["host"] = info.host;
  run["started_at"] = info.started_at;
  run["timings"] = timings;
  run["memory"] = memory;
  run["results"] = results;
  return run;
}

// format and schema_version first: a newer file must get the "upgrade" message, not a complaint
// about a key this build has never heard of.
void check_format(const ObjectReader& run, const std::string& where) {
  const std::string format = run.string("format");
  if (format != kRunFormat) {
    throw InputError(where + ": not a parity run (format \"" + format + "\", expected \"" +
                     kRunFormat + "\")");
  }
  const int64_t schema_version = run.integer("schema_version");
  if (schema_version > kRunSchemaVersion) {
    throw InputError(where + ": written by a newer parity (schema " +
                     std::to_string(schema_version) + "); this build reads schema " +
                     std::to_string(kRunSchemaVersion) + "; upgrade");
  }
  if (schema_version < 1) {
    throw InputError(where + ": schema_version " + std::to_string(schema_version) +
                     " is not valid; this build reads schema " + std::to_string(kRunSchemaVersion));
  }
}

// memory's optional per-replica parameter and optimizer-state bytes: both lists or neither, one
// value per replica at most (fewer after a resume on fewer devices, as the peaks), none negative.
void read_state_bytes(const ObjectReader& memory, RunInfo& info, const std::string& where) {
  if (!memory.has("param_bytes_per_replica")) return;
  MemoryReport& report = info.memory;
  report.param_bytes_per_replica = memory.integers("param_bytes_per_replica");
  report.optimizer_state_bytes_per_replica = memory.integers("optimizer_state_bytes_per_replica");
  report.state_layout = memory.string("state_layout");
  const size_t count = report.param_bytes_per_replica.size();
  if (count != report.optimizer_state_bytes_per_replica.size() ||
      static_cast<int64_t>(count) > info.replicas) {
    throw InputError(fmt::format(
        "{}: key \"memory\": {} parameter and {} optimizer-state byte counts for {} replicas; "
        "expected one of each per replica; the file is damaged: rerun the producer",
        where, count, report.optimizer_state_bytes_per_replica.size(), info.replicas));
  }
  for (const auto* counts :
       {&report.param_bytes_per_replica, &report.optimizer_state_bytes_per_replica}) {
    if (std::any_of(counts->begin(), counts->end(), [](int64_t bytes) { return bytes < 0; })) {
      throw InputError(where + ": key \"memory\": a negative byte count; the file is damaged: "
                       "rerun the producer");
    }
  }
}

RunInfo run_info_from_json(const Json& document, const std::string& where) {
  const ObjectReader run = expect_object(document, where, " at the top level");
  check_format(run, where);

  RunInfo info;
  info.schema_version = static_cast<int>(run.integer("schema_version"));
  info.producer = run.string("producer");
  info.status = run.string("status");
  if (info.status != "running" && info.status != "complete" && info.status != "incomplete") {
    throw InputError(where + ": key \"status\": expected \"running\", \"complete\" or " +
                     "\"incomplete\", found \"" + info.status + "\"");
  }
  info.failure = run.string("failure");
  const ObjectReader case_object = run.object("case");
  info.case_name = case_object.string("name");
  info.case_hash = case_object.string("hash");
  info.case_toml = case_object.string("toml");
  info.replicas = run.integer("replicas");
  if (info.replicas < 1 || info.replicas > kMaxRunReplicas) {
    throw InputError(fmt::format("{}: key \"replicas\": {} is not a number of replicas (1 to {}); "
                                 "the file is damaged: rerun the producer",
                                 where, info.replicas, kMaxRunReplicas));
  }
  info.processes = run.integer("processes");
  if (info.processes < 1 || info.processes > info.replicas) {
    throw InputError(fmt::format("{}: key \"processes\": {} is not between 1 and the {} "
                                 "replicas; the file is damaged: rerun the producer",
                                 where, info.processes, info.replicas));
  }
  if (run.has("parallel_style")) info.parallel_style = run.string("parallel_style");
  if (run.has("steps")) {
    info.steps = run.integer("steps");
    if (info.steps < 0) {
      throw InputError(fmt::format("{}: key \"steps\": {} is negative; the file is damaged: "
                                   "rerun the producer",
                                   where, info.steps));
    }
  }
  info.dtype = run.string("dtype");
  info.optimizer = run.string("optimizer");
  info.seed = run.unsigned_integer("seed");
  info.versions = run.string_map("versions");
  info.host = run.string("host");
  info.started_at = run.string("started_at");
  const ObjectReader timings = run.object("timings");
  info.timings.setup_seconds = timings.number("setup_seconds");
  info.timings.first_step_seconds = timings.number("first_step_seconds");
  info.timings.steady_step_median_seconds = timings.number("steady_step_median_seconds");
  info.timings.steady_step_spread_seconds = timings.number("steady_step_spread_seconds");
  info.timings.steady_steps = timings.integer("steady_steps");
  const ObjectReader memory = run.object("memory");
  info.memory.peak_bytes_per_replica = memory.integers("peak_bytes_per_replica");
  // Fewer peaks than replicas is legitimate: a run resumed on fewer devices (case S10) reports
  // the devices that remain.
  if (static_cast<int64_t>(info.memory.peak_bytes_per_replica.size()) > info.replicas) {
    throw InputError(fmt::format("{}: key \"peak_bytes_per_replica\": {} values for {} replicas; "
                                 "the file is damaged: rerun the producer",
                                 where, info.memory.peak_bytes_per_replica.size(), info.replicas));
  }
  info.memory.method = memory.string("method");
  read_state_bytes(memory, info, where);
  info.results = run.number_map("results");
  return info;
}

// ---------------------------------------------------------------------------------------------
// StepMetrics <-> JSON.

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

// `being_written`: run.json says "running", so an unterminated last line is the step its producer
// is writing at this moment, not damage; it is left out and the steps before it are read.
std::vector<StepMetrics> read_metrics(const fs::path& path, const RunInfo& info,
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

// "PREFIX000012" + suffix -> 12; nullopt for any other name (temp files, stray files).
std::optional<int64_t> step_of_file(const std::string& name, const std::string& prefix,
                                    const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size()) return std::nullopt;
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

// The steps of the files tensors/PREFIXNNNNNN.safetensors, sorted.
std::vector<int64_t> list_recorded_steps(const fs::path& dir, const std::string& prefix) {
  std::vector<int64_t> steps;
  const fs::path tensors_dir = dir / kTensorsDir;
  std::error_code error;
  if (!fs::is_directory(tensors_dir, error)) return steps;
  for (const auto& entry : fs::directory_iterator(tensors_dir)) {
    if (!entry.is_regular_file()) continue;
    if (const auto step = step_of_file(entry.path().filename().string(), prefix, ".safetensors"))
      steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

fs::path recorded_file_path(const fs::path& dir, const std::string& prefix, int64_t step) {
  return dir / kTensorsDir / fmt::format("{}{:06d}.safetensors", prefix, step);
}

// Every file the writers put in tensors/ carries its step in its metadata (RunDirWriter, parity
// import tensors). A file whose metadata names another step was renamed or copied over another;
// one without it was not written there by parity. Either would be judged as the wrong step.
void check_recorded_step(const fs::path& path, const std::map<std::string, std::string>& metadata,
                         int64_t step) {
  const auto found = metadata.find("step");
  if (found != metadata.end() && found->second == std::to_string(step)) return;
  if (found == metadata.end()) {
    throw InputError(fmt::format(
        "{}: no \"step\" in its metadata, which every tensor file of a run directory carries: "
        "the file was not written by parity; rerun the producer, or import the tensors with "
        "parity import tensors",
        path.string()));
  }
  throw InputError(fmt::format(
      "{}: its metadata says step {}, its name step {}: the file was renamed or copied over "
      "another, so the run directory is damaged; rerun the producer",
      path.string(), found->second, step));
}

// The tensors of tensors/PREFIXNNNNNN.safetensors; InputError naming the steps that were recorded
// (`what`: "tensors", "layer outputs") when that file is not there.
NamedTensors read_recorded_file(const fs::path& dir, const std::string& prefix, int64_t step,
                                const std::string& what) {
  const fs::path path = recorded_file_path(dir, prefix, step);
  if (!fs::is_regular_file(path)) {
    std::ostringstream message;
    message << "no " << what << " recorded at step " << step << " in " << dir.string() << " (no "
            << path.filename().string() << "); recorded steps:";
    const std::vector<int64_t> recorded = list_recorded_steps(dir, prefix);
    if (recorded.empty()) message << " none";
    for (int64_t recorded_step : recorded) message << ' ' << recorded_step;
    throw InputError(message.str());
  }
  SafetensorsFile file = read_safetensors(path);
  check_recorded_step(path, file.metadata, step);
  return std::move(file.tensors);
}

}  // namespace

void write_text_file_atomically(const fs::path& path, const std::string& text) {
  const std::string failure = replace_file_without_following_links(path, text);
  if (!failure.empty()) throw RunError("cannot write " + path.string() + ": " + failure);
}

fs::path step_tensors_path(const fs::path& dir, int64_t step) {
  return recorded_file_path(dir, kStepTensorsPrefix, step);
}

fs::path intermediates_path(const fs::path& dir, int64_t step) {
  return recorded_file_path(dir, kIntermediatesPrefix, step);
}

std::optional<int64_t> step_of_tensor_file(const std::string& name, const std::string& suffix) {
  return step_of_file(name, kStepTensorsPrefix, suffix);
}

// ---------------------------------------------------------------------------------------------
// RunDirWriter.

RunDirWriter::RunDirWriter(std::filesystem::path dir, RunInfo info, bool overwrite)
    : dir_(std::move(dir)),
      lock_(std::make_unique<DirectoryLock>(dir_, info.producer + " run of case " + info.case_name)),
      info_(std::move(info)) {
  if (fs::exists(dir_ / kRunJson)) {
    if (!overwrite) {
      throw InputError("run directory " + dir_.string() +
                       " already holds a run (run.json exists); choose a new directory or allow "
                       "overwriting it");
    }
    // The old run's steps and tensors must not mix with the new ones; run.json is replaced below.
    std::error_code error;
    fs::remove(dir_ / kMetricsJsonl, error);
    if (!error) fs::remove(rng_streams_path(dir_), error);
    if (!error) fs::remove_all(dir_ / kTensorsDir, error);
    if (error) {
      throw InputError("cannot clear the old run in " + dir_.string() + ": " + error.message());
    }
  }
  std::error_code error;
  fs::create_directories(dir_ / kTensorsDir, error);
  if (error) {
    throw InputError("cannot create run directory " + (dir_ / kTensorsDir).string() + ": " +
                     error.message());
  }
  // metrics.jsonl exists before run.json does, so a reader that finds run.json finds both.
  // A stream follows links: one planted in the folder (metrics.jsonl -> /etc/passwd) is refused.
  check_output_file(dir_ / kMetricsJsonl, "run file", /*overwrite=*/true);
  metrics_.open(dir_ / kMetricsJsonl, std::ios::binary | std::ios::trunc);
  if (!metrics_) {
    throw InputError("cannot create " + (dir_ / kMetricsJsonl).string() + ": " +
                     std::strerror(errno));
  }
  info_.schema_version = kRunSchemaVersion;
  info_.status = "running";
  info_.failure.clear();
  if (info_.started_at.empty()) info_.started_at = utc_timestamp_now();
  write_run_json();
  on_stop_ = std::make_unique<TerminationAction>([this](const std::string& reason) {
    try {
      mark_incomplete(reason);
    } catch (const std::exception&) {
      // The disk may be what failed; the process ends either way, and run.json says "running".
    }
  });
}

RunDirWriter::~RunDirWriter() {
  // A producer that said neither finish() nor why it stopped is being unwound by an error.
  try {
    mark_incomplete("the producer stopped on an error before the end (its error output says "
                    "which)");
  } catch (const std::exception&) {
    // Nothing more can be done from a destructor; run.json keeps saying "running".
  }
}

void RunDirWriter::append_step(const StepMetrics& metrics) {
  // One write per line, flushed at once: a killed producer loses at most the line in flight.
  const std::string line =
      step_metrics_to_json(metrics).dump(-1, ' ', false, Json::error_handler_t::replace);
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_ << line << '\n';
  metrics_.flush();
  if (!metrics_) {
    throw RunError("writing step " + std::to_string(metrics.step) + " to " +
                   (dir_ / kMetricsJsonl).string() + " failed: " + std::strerror(errno));
  }
}

void RunDirWriter::append_rng_draws(const std::vector<MaskDraw>& draws) {
  if (draws.empty()) return;
  const fs::path path = rng_streams_path(dir_);
  if (!rng_.is_open()) {
    check_output_file(path, "run file", /*overwrite=*/true);
    rng_.open(path, std::ios::binary | std::ios::trunc);
    if (!rng_) throw RunError("cannot create " + path.string() + ": " + std::strerror(errno));
  }
  std::string lines;
  for (const MaskDraw& draw : draws) lines += mask_draw_to_json_line(draw) + '\n';
  rng_ << lines;
  rng_.flush();
  if (!rng_) {
    throw RunError("writing step " + std::to_string(draws.front().step) + "'s RNG streams to " +
                   path.string() + " failed: " + std::strerror(errno));
  }
}

void RunDirWriter::write_tensors(int64_t step, const NamedTensors& tensors) {
  write_safetensors(step_tensors_path(dir_, step), tensors,
                    {{"step", std::to_string(step)}, {"producer", info_.producer}});
}

void RunDirWriter::write_intermediates(int64_t step, const NamedTensors& tensors) {
  write_safetensors(intermediates_path(dir_, step), tensors,
                    {{"step", std::to_string(step)}, {"producer", info_.producer}});
}

void RunDirWriter::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_.flush();
  info_.status = "complete";
  info_.failure.clear();
  write_run_json();
}

void RunDirWriter::mark_incomplete(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (info_.status != "running") return;  // the first reason stands; a stop after the end is none
  metrics_.flush();  // keep every step written so far
  info_.status = "incomplete";
  info_.failure = why;
  write_run_json();
}

void RunDirWriter::write_run_json() const {
  const std::string text =
      run_info_to_json(info_).dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  write_text_file_atomically(dir_ / kRunJson, text);
}

// ---------------------------------------------------------------------------------------------
// Reader.

RunDir read_run_dir(const std::filesystem::path& dir) {
  const fs::path run_json = dir / kRunJson;
  if (!fs::is_regular_file(run_json)) {
    throw InputError("not a run directory: no run.json in " + dir.string());
  }
  const Json document = parse_json_document(read_text_file(run_json), run_json.string());

  RunDir run;
  run.dir = dir;
  run.info = run_info_from_json(document, run_json.string());
  run.steps = read_metrics(dir / kMetricsJsonl, run.info, run.info.status == "running");
  run.tensor_steps = list_recorded_steps(dir, kStepTensorsPrefix);
  run.intermediate_steps = list_recorded_steps(dir, kIntermediatesPrefix);
  std::vector<int64_t> steps;
  for (const StepMetrics& metrics : run.steps) steps.push_back(metrics.step);
  run.rng = read_rng_streams(dir, run.info.replicas, steps, run.info.status == "running");
  hold_to_promises(run);
  return run;
}

bool mark_run_dir_incomplete(const std::filesystem::path& dir, const std::string& why) {
  const fs::path run_json = dir / kRunJson;
  std::error_code error;
  if (!fs::is_regular_file(run_json, error)) return false;
  Json document;
  try {
    document = Json::parse(read_text_file(run_json));
  } catch (const std::exception&) {
    return false;  // not ours to repair; the reader will say what is wrong with it
  }
  if (!document.is_object() || document.value("status", "") != "running") return false;
  document["status"] = "incomplete";
  document["failure"] = why;
  write_text_file_atomically(run_json,
                             document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  return true;
}

NamedTensors read_step_tensors(const std::filesystem::path& dir, int64_t step) {
  return read_recorded_file(dir, kStepTensorsPrefix, step, "tensors");
}

NamedTensors read_step_intermediates(const std::filesystem::path& dir, int64_t step) {
  return read_recorded_file(dir, kIntermediatesPrefix, step, "layer outputs");
}

}  // namespace parity
