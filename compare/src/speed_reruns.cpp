#include "parity/compare/speed_reruns.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>

#include "parity/common/digest.h"
#include "parity/common/error.h"

namespace parity::compare {
namespace {

namespace fs = std::filesystem;

void check_side(const std::vector<RunDir>& runs, const RunDir& of, const char* side) {
  for (const RunDir& run : runs) {
    if (run.info.case_hash != of.info.case_hash) {
      throw InputError(fmt::format(
          "{} rerun {} trained case {} (hash {}), the {} {} (hash {}): speed reruns must be "
          "of the {}'s own case",
          side, run.dir.string(), run.info.case_name, run.info.case_hash, side, of.dir.string(),
          of.info.case_hash, side));
    }
    if (run.info.producer != of.info.producer) {
      throw InputError(fmt::format(
          "{} rerun {} was made by {}, the {} {} by {}: a speed rerun must be made by its "
          "side's producer, or it measures another program; rerun it with {}",
          side, run.dir.string(), run.info.producer, side, of.dir.string(), of.info.producer,
          of.info.producer));
    }
  }
}

// What tells one run from another whatever folder holds it: when and where it started, and
// every step's metrics (a rerun's step times never repeat another's to the bit).
std::string run_identity(const RunDir& run) {
  Fnv1a64 digest;
  for (const StepMetrics& metrics : run.steps) {
    for (const double value : {metrics.loss, metrics.step_seconds}) {
      digest.update(&value, sizeof value);
    }
  }
  return fmt::format("{} {} {}", run.info.started_at, run.info.host, digest.hex());
}

std::string resolved(const fs::path& dir) {
  std::error_code error;
  const fs::path path = fs::weakly_canonical(dir, error);
  return (error ? fs::absolute(dir) : path).lexically_normal().string();
}

}  // namespace

void check_speed_reruns(const std::vector<RunDir>& baseline_runs, const RunDir& baseline,
                        const std::vector<RunDir>& candidate_runs, const RunDir& candidate) {
  check_side(baseline_runs, baseline, "baseline");
  check_side(candidate_runs, candidate, "candidate");
  std::map<std::string, const RunDir*> by_dir, by_identity;
  for (const auto* runs : {&baseline_runs, &candidate_runs}) {
    for (const RunDir& run : *runs) {
      const auto [dir, new_dir] = by_dir.emplace(resolved(run.dir), &run);
      if (!new_dir) {
        throw InputError(fmt::format(
            "speed rerun {} is given twice (also as {}): each pair of speed runs must be runs "
            "of their own, or one measurement counts as several; pass each rerun once",
            run.dir.string(), dir->second->dir.string()));
      }
      const auto [same, new_run] = by_identity.emplace(run_identity(run), &run);
      if (!new_run) {
        throw InputError(fmt::format(
            "speed reruns {} and {} are copies of one run (the same start {}, host {} and step "
            "metrics): each pair of speed runs must be runs of their own, or one measurement "
            "counts as several; rerun the job for each pair",
            same->second->dir.string(), run.dir.string(), run.info.started_at, run.info.host));
      }
    }
  }
}

}  // namespace parity::compare
