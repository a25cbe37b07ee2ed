#include "parity/compare/gate.h"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "parity/common/error.h"

namespace parity::compare {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kGateJson = "gate.json";
constexpr const char* kGateFormat = "parity-gate";
constexpr int kGateSchemaVersion = 1;

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

Json to_json(const Calibration& calibration) {
  return {{"producer", calibration.producer},
          {"reruns", calibration.reruns},
          {"margin", calibration.margin},
          {"calibrated_at", calibration.calibrated_at},
          {"observed",
           {{"loss_max_abs", calibration.loss_max_abs},
            {"tensor_max_abs", calibration.tensor_max_abs},
            {"throughput_drop", calibration.throughput_drop},
            {"memory_growth", calibration.memory_growth}}},
          {"tolerances",
           {{"loss_atol", calibration.loss_atol},
            {"tensor_atol", calibration.tensor_atol},
            {"max_throughput_drop", calibration.max_throughput_drop},
            {"max_memory_growth", calibration.max_memory_growth}}}};
}

// Every number of a calibration, by its gate.json name, for the finiteness checks.
std::vector<std::pair<const char*, double>> numbers_of(const Calibration& calibration) {
  return {{"margin", calibration.margin},
          {"observed.loss_max_abs", calibration.loss_max_abs},
          {"observed.tensor_max_abs", calibration.tensor_max_abs},
          {"observed.throughput_drop", calibration.throughput_drop},
          {"observed.memory_growth", calibration.memory_growth},
          {"tolerances.loss_atol", calibration.loss_atol},
          {"tolerances.tensor_atol", calibration.tensor_atol},
          {"tolerances.max_throughput_drop", calibration.max_throughput_drop},
          {"tolerances.max_memory_growth", calibration.max_memory_growth}};
}

Calibration from_json(const std::string& platform, const Json& entry, const fs::path& file) {
  const auto field = [&](const Json& object, const char* section, const char* key) -> const Json& {
    if (!object.is_object() || !object.contains(key)) {
      throw InputError(
          fmt::format("{}: calibration for '{}' lacks \"{}{}\"; recalibrate with "
                      "parity gate --calibrate N",
                      file.string(), platform, section, key));
    }
    return object.at(key);
  };
  // JSON has no NaN or infinity: nlohmann writes them as null (what a calibration with
  // --margin nan left before numbers were checked), and reads 1e999 as infinity.
  const auto number = [&](const Json& object, const char* section, const char* key) {
    const Json& value = field(object, section, key);
    if (value.is_null() || (value.is_number() && !std::isfinite(value.get<double>()))) {
      throw InputError(fmt::format(
          "{}: calibration for '{}' has \"{}{}\": {}, not a finite number, so it cannot "
          "gate; recalibrate with parity gate --calibrate N (or --reruns DIR...)",
          file.string(), platform, section, key, value.dump()));
    }
    return value.get<double>();
  };
  try {
    Calibration calibration;
    calibration.platform = platform;
    calibration.producer = field(entry, "", "producer").get<std::string>();
    calibration.reruns = field(entry, "", "reruns").get<int64_t>();
    calibration.margin = number(entry, "", "margin");
    calibration.calibrated_at = field(entry, "", "calibrated_at").get<std::string>();
    const Json& observed = field(entry, "", "observed");
    calibration.loss_max_abs = number(observed, "observed.", "loss_max_abs");
    calibration.tensor_max_abs = number(observed, "observed.", "tensor_max_abs");
    calibration.throughput_drop = number(observed, "observed.", "throughput_drop");
    calibration.memory_growth = number(observed, "observed.", "memory_growth");
    const Json& tolerances = field(entry, "", "tolerances");
    calibration.loss_atol = number(tolerances, "tolerances.", "loss_atol");
    calibration.tensor_atol = number(tolerances, "tolerances.", "tensor_atol");
    calibration.max_throughput_drop =
        number(tolerances, "tolerances.", "max_throughput_drop");
    calibration.max_memory_growth =
        number(tolerances, "tolerances.", "max_memory_growth");
    return calibration;
  } catch (const Json::type_error& error) {
    throw InputError(fmt::format("{}: calibration for '{}' has a value of the wrong type ({}); "
                                 "recalibrate with parity gate --calibrate N",
                                 file.string(), platform, error.what()));
  }
}

Json read_gate_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("{}: cannot be read", file.string()));
  Json document;
  try {
    document = Json::parse(in);
  } catch (const Json::parse_error& error) {
    throw InputError(fmt::format("{}: not valid JSON ({})", file.string(), error.what()));
  }
  if (!document.is_object() || document.value("format", "") != kGateFormat ||
      document.value("schema_version", 0) != kGateSchemaVersion ||
      !document.contains("calibrations") || !document["calibrations"].is_object()) {
    throw InputError(fmt::format(
        "{}: not a parity gate file of schema version {} (expected \"format\": \"{}\" and a "
        "\"calibrations\" object); recalibrate with parity gate --calibrate N",
        file.string(), kGateSchemaVersion, kGateFormat));
  }
  return document;
}

// The largest |loss A - loss B| and the largest element difference of any recorded tensor.
double max_loss_difference(const ComparisonResult& result) {
  const auto& differences = result.series.loss_abs_diff;
  return differences.empty() ? 0 : *std::max_element(differences.begin(), differences.end());
}

double max_tensor_difference(const ComparisonResult& result) {
  double worst = 0;
  for (const Check& check : result.checks) {
    for (const TensorDelta& delta : check.tensors) worst = std::max(worst, delta.max_abs);
  }
  return worst;
}

int64_t largest_peak(const RunSummary& run) {
  const auto& peaks = run.peak_bytes_per_replica;
  return peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
}

}  // namespace

std::string current_platform() {
  utsname names{};
  uname(&names);
  return fmt::format("{}-{}, {}, {} hardware threads", names.sysname, names.machine, cpu_model(),
                     std::thread::hardware_concurrency());
}

std::map<std::string, Calibration> read_calibrations(const fs::path& baseline_dir) {
  const fs::path file = baseline_dir / kGateJson;
  std::map<std::string, Calibration> calibrations;
  if (!fs::exists(file)) return calibrations;
  const Json document = read_gate_json(file);
  for (const auto& [platform, entry] : document["calibrations"].items()) {
    calibrations.emplace(platform, from_json(platform, entry, file));
  }
  return calibrations;
}

void write_calibration(const fs::path& baseline_dir, const Calibration& calibration) {
  const fs::path file = baseline_dir / kGateJson;
  // JSON cannot hold NaN or infinity (nlohmann writes null), and a gate read back from such a
  // file could never judge: refuse before touching the file.
  for (const auto& [name, value] : numbers_of(calibration)) {
    if (!std::isfinite(value)) {
      throw InputError(fmt::format(
          "{}: not written: the calibration for '{}' has {} = {}, not a finite number; "
          "calibrate with a finite --margin and reruns whose losses, tensors, throughput and "
          "memory are finite",
          file.string(), calibration.platform, name, value));
    }
  }
  Json document = fs::exists(file) ? read_gate_json(file)
                                   : Json{{"format", kGateFormat},
                                          {"schema_version", kGateSchemaVersion},
                                          {"calibrations", Json::object()}};
  document["calibrations"][calibration.platform] = to_json(calibration);
  write_text_file_atomically(file, document.dump(2) + "\n");
}

Calibration calibrate(const RunDir& baseline, const std::vector<RunDir>& reruns, double margin,
                      const GateThresholds& floors) {
  if (reruns.empty()) throw InputError("calibration needs at least one rerun of the baseline");
  if (!std::isfinite(margin) || margin < 1) {
    throw InputError(fmt::format(
        "calibration margin {}: expected a finite number >= 1 (the tolerances are the largest "
        "deviation of a rerun times the margin; below 1 the reruns themselves would fail)",
        margin));
  }
  Calibration calibration;
  calibration.platform = current_platform();
  calibration.producer = baseline.info.producer;
  calibration.reruns = static_cast<int64_t>(reruns.size());
  calibration.margin = margin;
  calibration.calibrated_at = utc_timestamp_now();
  CompareOptions options;
  options.require_same_case = true;
  for (const RunDir& rerun : reruns) {
    if (rerun.info.case_hash != baseline.info.case_hash) {
      throw InputError(
          fmt::format("rerun {} trained case {} (hash {}), the baseline {} (hash {}); "
                      "a calibration needs reruns of the baseline's own case",
                      rerun.dir.string(), rerun.info.case_name, rerun.info.case_hash,
                      baseline.info.case_name, baseline.info.case_hash));
    }
    const ComparisonResult result = compare_runs(rerun, baseline, options);
    if (result.verdict == Verdict::kIncomplete) {
      throw InputError(fmt::format("rerun {} is incomplete ({}); rerun it before calibrating",
                                   rerun.dir.string(), rerun.info.failure));
    }
    calibration.loss_max_abs = std::max(calibration.loss_max_abs, max_loss_difference(result));
    calibration.tensor_max_abs =
        std::max(calibration.tensor_max_abs, max_tensor_difference(result));
    if (result.a.samples_per_second > 0 && result.b.samples_per_second > 0) {
      calibration.throughput_drop =
          std::max(calibration.throughput_drop,
                   1 - result.a.samples_per_second / result.b.samples_per_second);
    }
    if (largest_peak(result.a) > 0 && largest_peak(result.b) > 0) {
      calibration.memory_growth =
          std::max(calibration.memory_growth, static_cast<double>(largest_peak(result.a)) /
                                                      static_cast<double>(largest_peak(result.b)) -
                                                  1);
    }
  }
  calibration.loss_atol = calibration.loss_max_abs * margin;
  calibration.tensor_atol = calibration.tensor_max_abs * margin;
  calibration.max_throughput_drop =
      std::max(floors.max_throughput_drop, calibration.throughput_drop * margin);
  calibration.max_memory_growth =
      std::max(floors.max_memory_growth, calibration.memory_growth * margin);
  return calibration;
}

CompareOptions gate_options(const GateThresholds& thresholds,
                            const std::optional<Calibration>& calibration) {
  CompareOptions options;
  options.require_same_case = true;
  options.fail_on_performance = true;
  double max_drop = thresholds.max_throughput_drop;
  double max_growth = thresholds.max_memory_growth;
  if (calibration) {
    options.loss_rtol = 0;
    options.loss_atol = calibration->loss_atol;
    options.tensor_rtol = 0;
    options.tensor_atol = calibration->tensor_atol;
    options.allowed_bad_steps = 0;
    max_drop = std::max(max_drop, calibration->max_throughput_drop);
    max_growth = std::max(max_growth, calibration->max_memory_growth);
  }
  options.throughput_warn_ratio = 1 - max_drop;
  // Judged by an interval, not by one timing of each run (speed_verdict.h).
  options.speed = CompareOptions::SpeedRuns{};
  options.memory_warn_ratio = 1 + max_growth;
  return options;
}

}  // namespace parity::compare
