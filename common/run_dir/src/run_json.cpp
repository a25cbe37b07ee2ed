// run.json, schema 3 (schema 1, without "steps", is still read):
//
//   {"format": "parity-run", "schema_version": 3, "producer", "status", "failure",
//    "case": {"name", "hash", "toml"}, "replicas", "processes", "steps" (optional),
//    "dtype", "optimizer", "seed", "versions": {name: version}, "host",
//    "started_at", "timings": {"setup_seconds", "first_step_seconds",
//                "steady_step_median_seconds", "steady_step_spread_seconds",
//                "steady_steps"},
//    "memory": {"peak_bytes_per_replica": [...], "method",
//               "param_bytes_per_replica", "optimizer_state_bytes_per_replica",
//               "state_layout" (these three optional)},
//    "parallel_style" (optional),
//    "results": {name: number}}
//
// Replaced atomically (temp file + rename: write_text_file_atomically), so a reader never sees
// half of it.
// Non-finite numbers are written as the strings "NaN", "Infinity", "-Infinity" (json_fields.h).
#include "run_json.h"

#include <fmt/format.h>

#include <algorithm>

#include "parity/common/error.h"

namespace parity {
namespace {

constexpr const char* kRunFormat = "parity-run";

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

}  // namespace

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

}  // namespace parity
