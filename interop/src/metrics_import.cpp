#include "parity/interop/metrics_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "parity/common/error.h"
#include "parity/common/run_dir.h"
#include "parity/common/step_timing.h"
#include "parity/interop/import_checks.h"
#include "parity/interop/tf_events.h"
#include "rng_import.h"

namespace parity::interop {
namespace {

namespace fs = std::filesystem;

bool is_event_file(const fs::path& path) {
  return path.filename().string().rfind("events.out.tfevents.", 0) == 0;
}

std::string extension(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext;
}

MetricsFormat detect(const fs::path& path) {
  if (fs::is_directory(path) || is_event_file(path)) return MetricsFormat::kTfEvents;
  const std::string ext = extension(path);
  if (ext == ".jsonl" || ext == ".ndjson") return MetricsFormat::kJsonLines;
  if (ext == ".csv") return MetricsFormat::kCsv;
  throw InputError(
      fmt::format("{}: cannot tell the format from the name; pass --format tfevents, jsonl or csv",
                  path.string()));
}

const char* producer_name(MetricsFormat format) {
  switch (format) {
    case MetricsFormat::kTfEvents:
      return "import:tensorboard";
    case MetricsFormat::kJsonLines:
      return "import:jsonl";
    default:
      return "import:csv";
  }
}

// Adds one value; the same step twice must carry the same value (a resumed writer may repeat).
void add(MetricSeries& series, const std::string& name, int64_t step, double value,
         const std::string& where) {
  check_imported_step(step, where,
                      "Fix: log each step as the 0-based optimizer step (the first step is 0)");
  auto [it, inserted] = series[name].emplace(step, value);
  if (!inserted && !(it->second == value || (std::isnan(it->second) && std::isnan(value)))) {
    throw InputError(
        fmt::format("{}: '{}' at step {} is {} here but {} earlier; one value per "
                    "step (keep one run per file)",
                    where, name, step, value, it->second));
  }
}

void read_tfevents(const fs::path& path, MetricSeries& series) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::directory_iterator(path)) {
      if (is_event_file(entry.path())) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      throw InputError(
          fmt::format("{}: no events.out.tfevents.* file in this directory", path.string()));
    }
  } else {
    files.push_back(path);
  }
  for (const fs::path& file : files) {
    for (const EventScalar& scalar : read_event_file(file).scalars) {
      add(series, scalar.tag, scalar.step, scalar.value, file.string());
    }
  }
}

// nlohmann's message without its "[json.exception.out_of_range.406] " prefix.
std::string nlohmann_detail(const nlohmann::json::exception& error) {
  const std::string message = error.what();
  const size_t end = message.find("] ");
  return end == std::string::npos ? message : message.substr(end + 2);
}

// What a line in the run directory's own StepMetrics format records beyond numbers (the
// interop/python helpers write these): carried into the imported run, so that its data order
// and per-replica losses are checked too.
struct StepDetails {
  std::vector<double> replica_losses;
  std::string samples_digest, samples_set_digest;
  std::optional<int64_t> duplicate_samples;
};

// A number, or parity's spelling of a non-finite one ("NaN", "Infinity", "-Infinity").
std::optional<double> number_of(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const std::string word = value.get<std::string>();
  if (word == "NaN") return std::nan("");
  if (word == "Infinity") return HUGE_VAL;
  if (word == "-Infinity") return -HUGE_VAL;
  return std::nullopt;
}

// `spec`, when given, is the case whose parallel.replicas a "replica_losses" list must match.
StepDetails details_of(const nlohmann::json& line, const std::string& where,
                       const CaseSpec* spec) {
  StepDetails details;
  if (line.contains("replica_losses")) {
    const nlohmann::json& losses = line["replica_losses"];
    if (!losses.is_array()) {
      throw InputError(fmt::format("{}: \"replica_losses\" must be a list of numbers", where));
    }
    for (const nlohmann::json& loss : losses) {
      const std::optional<double> value = number_of(loss);
      if (!value) {
        throw InputError(fmt::format("{}: \"replica_losses\" holds {}, not a number", where,
                                     loss.dump()));
      }
      details.replica_losses.push_back(*value);
    }
    // An empty list is how the run directory's format says "not recorded".
    if (spec != nullptr && !losses.empty() &&
        static_cast<int64_t>(losses.size()) != spec->parallel.replicas) {
      throw InputError(fmt::format(
          "{}: \"replica_losses\" holds {} {}, but case {} trains {} replicas "
          "(parallel.replicas); log one loss per replica, or import with --set "
          "parallel.replicas={} if the run had {}",
          where, losses.size(), losses.size() == 1 ? "loss" : "losses", spec->name,
          spec->parallel.replicas, losses.size(), losses.size()));
    }
  }
  for (auto [key, digest] : {std::pair{"samples_digest", &details.samples_digest},
                             std::pair{"samples_set_digest", &details.samples_set_digest}}) {
    if (!line.contains(key)) continue;
    if (!line[key].is_string()) {
      throw InputError(fmt::format("{}: \"{}\" must be a string (digest_sample_ids' hex)",
                                   where, key));
    }
    *digest = line[key].get<std::string>();
  }
  if (line.contains("duplicate_samples")) {
    const nlohmann::json& duplicates = line["duplicate_samples"];
    if (!duplicates.is_number_integer() || duplicates.get<int64_t>() < 0) {
      throw InputError(
          fmt::format("{}: \"duplicate_samples\" must be a non-negative integer", where));
    }
    details.duplicate_samples = duplicates.get<int64_t>();
  }
  return details;
}

// `details`, when given, receives each step's StepDetails, checked against `spec`'s replicas.
void read_json_lines(const fs::path& path, MetricSeries& series,
                     std::map<int64_t, StepDetails>* details = nullptr,
                     const CaseSpec* spec = nullptr) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open", path.string()));
  std::string text;
  for (size_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", path.string(), number);
    nlohmann::json line;
    try {
      line = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& error) {
      throw InputError(fmt::format("{}, column {}: not valid JSON", where, error.byte));
    } catch (const nlohmann::json::out_of_range& error) {
      // The one other error parse() throws: a number beyond a double's range (406, "1e309").
      throw InputError(fmt::format("{}: not valid JSON: {}", where, nlohmann_detail(error)));
    }
    if (!line.is_object() || !line.contains("step") || !line["step"].is_number_integer()) {
      throw InputError(fmt::format("{}: expected an object with an integer \"step\"", where));
    }
    const int64_t step = line["step"].get<int64_t>();
    for (const auto& [name, value] : line.items()) {
      if (name == "step") continue;
      if (const std::optional<double> parsed = number_of(value)) {
        add(series, name, step, *parsed, where);
      }
    }
    if (details != nullptr) (*details)[step] = details_of(line, where, spec);
  }
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.push_back(cell);
      cell.clear();
    } else if (c != '\r') {
      cell.push_back(c);
    }
  }
  cells.push_back(cell);
  return cells;
}

void read_csv(const fs::path& path, MetricSeries& series) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open", path.string()));
  std::string text;
  if (!std::getline(in, text)) throw InputError(fmt::format("{}: empty file", path.string()));
  const std::vector<std::string> header = split_csv(text);
  const auto step_column = std::find(header.begin(), header.end(), "step");
  if (step_column == header.end()) {
    throw InputError(fmt::format("{} line 1: the header has no \"step\" column (found: {})",
                                 path.string(), fmt::join(header, ", ")));
  }
  const auto step_at = static_cast<size_t>(step_column - header.begin());
  for (size_t number = 2; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string> cells = split_csv(text);
    const std::string where = fmt::format("{} line {}", path.string(), number);
    if (cells.size() != header.size()) {
      throw InputError(
          fmt::format("{}: {} cells where the header has {}", where, cells.size(), header.size()));
    }
    const auto number_at = [&](size_t column) {
      const std::string& cell = cells[column];
      char* end = nullptr;
      const double value = std::strtod(cell.c_str(), &end);
      if (cell.empty() || *end != '\0') {
        throw InputError(fmt::format("{}, column {} ({}): '{}' is not a number", where, column + 1,
                                     header[column], cell));
      }
      return value;
    };
    const double step = number_at(step_at);
    if (step != std::floor(step)) {
      throw InputError(fmt::format("{}: step '{}' is not an integer", where, cells[step_at]));
    }
    // strtod reads "inf" and "1e300" too; converting them to int64 is undefined behaviour.
    if (std::fabs(step) >= 0x1p63) {
      throw InputError(fmt::format("{}: step '{}' is outside the range of a 64-bit integer", where,
                                   cells[step_at]));
    }
    for (size_t column = 0; column < header.size(); ++column) {
      if (column == step_at || cells[column].empty()) continue;  // empty: not logged this step
      add(series, header[column], static_cast<int64_t>(step), number_at(column), where);
    }
  }
}

// Per-step metrics, then the final values of an evaluation (their last logged value becomes the
// run's result of that name, as a producer records it: a comparison over seeds judges them).
const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = {"loss",         "grad_norm", "param_norm",
                                                 "lr",           "step_seconds", "test_loss",
                                                 "test_accuracy"};
  return names;
}

// The run's results: final_loss, the last logged loss (what producers record), and the last
// logged value of each mapped evaluation.
std::map<std::string, double> final_values(const MetricSeries& series,
                                           const std::map<std::string, std::string>& mapping) {
  std::map<std::string, double> results;
  results["final_loss"] = series.at(mapping.at("loss")).rbegin()->second;
  for (const char* evaluation : {"test_loss", "test_accuracy"}) {
    if (const auto mapped = mapping.find(evaluation); mapped != mapping.end()) {
      results[evaluation] = series.at(mapped->second).rbegin()->second;
    }
  }
  return results;
}

}  // namespace

MetricSeries read_metrics(const fs::path& path, MetricsFormat format) {
  if (!fs::exists(path)) throw InputError(fmt::format("{}: no such file", path.string()));
  if (format == MetricsFormat::kAuto) format = detect(path);
  MetricSeries series;
  if (format == MetricsFormat::kTfEvents) read_tfevents(path, series);
  if (format == MetricsFormat::kJsonLines) read_json_lines(path, series);
  if (format == MetricsFormat::kCsv) read_csv(path, series);
  return series;
}

ImportSummary import_metrics(const CaseSpec& spec, const MetricsImport& request) {
  const MetricsFormat format =
      request.format == MetricsFormat::kAuto ? detect(request.source) : request.format;
  MetricSeries series;
  std::map<int64_t, StepDetails> details;
  if (format == MetricsFormat::kJsonLines) {
    read_json_lines(request.source, series, &details, &spec);
  } else {
    series = read_metrics(request.source, format);
  }
  if (series.empty()) {
    throw InputError(fmt::format(
        "{}: logs no metric at any step (no line or record holds a step and a number); import "
        "the log the training script wrote while it ran",
        request.source.string()));
  }
  std::vector<std::string> found;
  for (const auto& entry : series) found.push_back(entry.first);
  if (!request.mapping.count("loss")) {
    throw InputError(fmt::format("--map loss=NAME is required; {} logs: {}",
                                 request.source.string(), fmt::join(found, ", ")));
  }
  for (const auto& [metric, name] : request.mapping) {
    if (std::find(metric_names().begin(), metric_names().end(), metric) == metric_names().end()) {
      throw InputError(fmt::format("--map {}={}: '{}' is not a run-directory metric; use {}",
                                   metric, name, metric, fmt::join(metric_names(), ", ")));
    }
    if (!series.count(name)) {
      throw InputError(fmt::format("--map {}={}: {} logs no '{}'; it logs: {}", metric, name,
                                   request.source.string(), name, fmt::join(found, ", ")));
    }
  }

  const std::map<int64_t, double>& losses = series.at(request.mapping.at("loss"));
  std::vector<int64_t> steps;
  for (const auto& entry : losses) steps.push_back(entry.first);
  const std::map<int64_t, std::vector<MaskDraw>> draws =
      read_logged_draws(request.source, spec, steps);

  ImportSummary summary;
  summary.producer = producer_name(format);
  RunInfo info = run_info_for_case(spec, summary.producer);
  // An import promises the steps its source logged (often every Nth), not the case's count.
  info.steps = static_cast<int64_t>(steps.size());
  info.results = final_values(series, request.mapping);
  const auto value_at = [&](const std::string& metric, int64_t step) {
    const auto mapped = request.mapping.find(metric);
    if (mapped == request.mapping.end()) return 0.0;
    const auto& values = series.at(mapped->second);
    const auto found_value = values.find(step);
    return found_value == values.end() ? 0.0 : found_value->second;
  };
  // Each step's wall time, when the script logged it: run.json's timings as a producer's, and
  // the per-step times the gate's throughput interval is judged from.
  if (request.mapping.count("step_seconds")) {
    std::vector<double> step_seconds;
    for (const int64_t step : steps) step_seconds.push_back(value_at("step_seconds", step));
    info.timings = summarize_step_times(0, step_seconds);
  }
  RunDirWriter writer(request.out_dir, info, request.overwrite);
  for (const auto& [step, loss] : losses) {
    StepMetrics metrics;
    metrics.step = step;
    metrics.loss = loss;
    metrics.grad_norm = value_at("grad_norm", step);
    metrics.param_norm = value_at("param_norm", step);
    metrics.lr = value_at("lr", step);
    metrics.step_seconds = value_at("step_seconds", step);
    if (const auto found_details = details.find(step); found_details != details.end()) {
      metrics.replica_losses = found_details->second.replica_losses;
      metrics.samples_digest = found_details->second.samples_digest;
      metrics.samples_set_digest = found_details->second.samples_set_digest;
      metrics.duplicate_samples = found_details->second.duplicate_samples;
    }
    if (const auto found_draws = draws.find(step); found_draws != draws.end()) {
      writer.append_rng_draws(found_draws->second);  // before the step's metrics, as producers do
      summary.dropout_draws += static_cast<int64_t>(found_draws->second.size());
    }
    writer.append_step(metrics);
    ++summary.steps;
  }
  writer.finish();
  return summary;
}

}  // namespace parity::interop
