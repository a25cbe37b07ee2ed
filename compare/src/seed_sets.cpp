#include "parity/compare/seed_sets.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "case_toml.h"
#include "checks.h"
#include "figures.h"
#include "parity/common/error.h"
#include "seed_metric_check.h"

namespace parity::compare {
namespace {


// Test loss and accuracy over the test set judge a model; the last training step's loss is one
// batch's (its spread over seeds is mostly that batch's draw), the fallback for runs that did
// not evaluate.
constexpr std::array<SeedMetric, 2> kEvaluationMetrics = {{
    {"test_loss", "Test loss", false},
    {"test_accuracy", "Test accuracy", true},
}};
constexpr SeedMetric kFinalLoss = {"final_loss", "Final training loss", false};

bool is_seed_key(const std::string& key) {
  return std::find(kCaseSeedKeys.begin(), kCaseSeedKeys.end(), key) != kCaseSeedKeys.end();
}

// What was trained: the case's keys but the seeds, and but [compare] and [scenario], which say
// how a run is judged, not what it computes.
std::map<std::string, std::string> trained_keys(std::map<std::string, std::string> keys) {
  for (auto it = keys.begin(); it != keys.end();) {
    const bool judging = it->first.rfind("compare.", 0) == 0 || it->first.rfind("scenario.", 0) == 0;
    it = judging || is_seed_key(it->first) ? keys.erase(it) : std::next(it);
  }
  return keys;
}

// "rng.seed = 3, data.seed = 0, init.seed = 0"; a seed the case text leaves out holds its
// default, 0.
std::string seeds_text(const std::map<std::string, std::string>& keys) {
  std::string text;
  for (const std::string& key : kCaseSeedKeys) {
    const auto found = keys.find(key);
    text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", key,
                        found == keys.end() ? "0" : found->second);
  }
  return text;
}

std::string run_json(const RunDir& run) { return (run.dir / "run.json").string(); }

// InputError unless the set is one case over distinct seeds, at least two runs.
void check_set(const std::vector<RunDir>& runs, char label) {
  if (runs.size() < 2) {
    throw InputError(fmt::format(
        "seed set {} has {} run(s); a comparison over seeds needs at least 2 runs per producer "
        "(parity run CASE --seeds N with N >= 2)",
        label, runs.size()));
  }
  std::map<std::string, const RunDir*> by_seeds;
  const std::map<std::string, std::string> first = trained_keys(case_keys(runs.front()));
  for (const RunDir& run : runs) {
    if (run.info.case_toml.empty()) {
      throw InputError(fmt::format(
          "{}: the run records no case; a run of a seed set must say what it trained (parity "
          "import metrics --case CASE --set rng.seed=N)",
          run_json(run)));
    }
    const std::map<std::string, std::string> keys = case_keys(run);  // parsed once per run
    const std::vector<std::string> differences = differing_case_keys(
        trained_keys(keys), first, "this run", runs.front().dir.filename().string());
    if (!differences.empty()) {
      throw InputError(fmt::format(
          "{}: seed set {} mixes cases: this run and {} differ in {}; a seed set is one case "
          "trained with different seeds ({}) only",
          run_json(run), label, runs.front().dir.string(), fmt::join(differences, "; "),
          fmt::join(kCaseSeedKeys, ", ")));
    }
    const auto [other, inserted] = by_seeds.emplace(seeds_text(keys), &run);
    if (!inserted) {
      throw InputError(fmt::format(
          "{}: seed set {} holds two runs with the same seeds ({}), this one and {}; each run of "
          "a set needs seeds of its own, else one run counts twice",
          run_json(run), label, other->first, other->second->dir.string()));
    }
  }
}

Check check_sets_case(const std::vector<RunDir>& a, const std::vector<RunDir>& b,
                      const SeedSetOptions& options) {
  Check check;
  check.id = "case";
  check.title = "Same case";
  check.details = differing_case_keys(trained_keys(case_keys(a.front())),
                                      trained_keys(case_keys(b.front())));
  const std::string seeds = fmt::format("{}", fmt::join(kCaseSeedKeys, ", "));
  if (check.details.empty()) {
    check.status = CheckStatus::kPass;
    check.summary = fmt::format(
        "Every run of both sets trained case {} (A: {} runs, B: {} runs), differing only in "
        "their seeds ({}).",
        a.front().info.case_name, a.size(), b.size(), seeds);
    return check;
  }
  check.status = options.require_same_case ? CheckStatus::kFail : CheckStatus::kWarn;
  const std::vector<std::string> keys = differing_key_names(check.details);
  check.summary = fmt::format(
      "Each set is one case over seeds, but the sets' cases differ (A: {}, B: {}) in {} key(s) "
      "besides the seeds: {}.",
      a.front().info.case_name, b.front().info.case_name, keys.size(), fmt::join(keys, ", "));
  return check;
}

bool complete(const RunDir& run) { return run.info.status == "complete"; }

bool every_finished_run_has(const std::vector<RunDir>& runs, const char* metric) {
  bool any = false;
  for (const RunDir& run : runs) {
    if (!complete(run)) continue;
    if (run.info.results.count(metric) == 0) return false;
    any = true;
  }
  return any;
}

std::vector<SeedMetric> metrics_to_judge(const std::vector<RunDir>& a,
                                         const std::vector<RunDir>& b) {
  std::vector<SeedMetric> metrics;
  for (const SeedMetric& metric : kEvaluationMetrics) {
    if (every_finished_run_has(a, metric.name) && every_finished_run_has(b, metric.name)) {
      metrics.push_back(metric);
    }
  }
  if (metrics.empty() && every_finished_run_has(a, kFinalLoss.name) &&
      every_finished_run_has(b, kFinalLoss.name)) {
    metrics.push_back(kFinalLoss);
  }
  return metrics;
}

SeedValues values_of(const std::vector<RunDir>& runs, const char* metric) {
  SeedValues values;
  for (const RunDir& run : runs) {
    if (!complete(run)) continue;
    values.labels.push_back(run.dir.filename().string());
    values.values.push_back(run.info.results.at(metric));
  }
  return values;
}

// The margin the options give, else run B's case's, else the default.
double margin_for(const SeedMetric& metric, const RunDir& reference,
                  const SeedSetOptions& options) {
  const std::optional<double>& given =
      metric.accuracy ? options.accuracy_margin : options.loss_margin;
  if (given) return *given;
  const std::map<std::string, std::string> keys = case_keys(reference);
  const auto recorded = keys.find(metric.accuracy ? "compare.seeds_accuracy_margin"
                                                  : "compare.seeds_loss_margin");
  if (recorded != keys.end()) return std::stod(recorded->second);
  const CompareSpec defaults;
  return metric.accuracy ? defaults.seeds_accuracy_margin : defaults.seeds_loss_margin;
}

// The RNG check of each seed's pair of runs (A's i-th with B's i-th); the first failing pair's
// check (else the first pair's) with the count of pairs checked, and that pair's diagnoses.
Check check_seed_pairs_rng(const std::vector<RunDir>& a, const std::vector<RunDir>& b,
                           std::vector<Diagnosis>& diagnoses) {
  const size_t pairs = std::min(a.size(), b.size());
  std::optional<Check> reported;
  size_t reported_pair = 0;
  for (size_t i = 0; i < pairs; ++i) {
    Findings findings;
    findings.replicas = a[i].info.replicas;
    Check check = check_rng(pair_runs(a[i], b[i]), findings);
    if (!reported || (check.status == CheckStatus::kFail && reported->status != CheckStatus::kFail)) {
      reported = std::move(check);
      reported_pair = i;
      diagnoses = diagnose_rng_streams(findings);
    }
    if (reported->status == CheckStatus::kFail) break;
  }
  Check check = std::move(*reported);
  check.summary = fmt::format("Seed pair {} of {} (A {}, B {}): {}", reported_pair + 1, pairs,
                              a[reported_pair].dir.filename().string(),
                              b[reported_pair].dir.filename().string(), check.summary);
  check.figures.insert(check.figures.begin(),
                       Figure{"seed_pairs_checked",
                              static_cast<double>(check.status == CheckStatus::kFail
                                                      ? reported_pair + 1
                                                      : pairs),
                              ""});
  return check;
}

std::vector<std::string> incomplete_runs(const std::vector<RunDir>& runs, char label) {
  std::vector<std::string> lines;
  for (const RunDir& run : runs) {
    if (complete(run)) continue;
    lines.push_back(fmt::format("run {} {} is {}{}", label, run.dir.string(), run.info.status,
                                run.info.failure.empty() ? "" : " (" + trim_right(run.info.failure) + ")"));
  }
  return lines;
}

Verdict decide(const ComparisonResult& result, bool incomplete) {
  if (incomplete) return Verdict::kIncomplete;
  const auto any = [&](CheckStatus status, bool seeds_only) {
    return std::any_of(result.checks.begin(), result.checks.end(), [&](const Check& check) {
      return check.status == status && (!seeds_only || check.id.rfind("seeds_", 0) == 0);
    });
  };
  if (any(CheckStatus::kFail, false)) return Verdict::kNotEquivalent;
  if (any(CheckStatus::kWarn, true)) return Verdict::kInconclusive;
  return Verdict::kEquivalent;
}

std::string distribution_clause(const SeedDistribution& d) {
  std::string what = d.title;  // "test loss" inside a sentence
  what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
  return fmt::format("{} {} against {} (difference {}, {:.0f}% interval [{}, {}], margin ±{})",
                     what, format_number(d.mean_a), format_number(d.mean_b),
                     format_number(d.mean_a - d.mean_b), d.confidence * 100,
                     format_number(d.interval_low), format_number(d.interval_high),
                     format_number(d.margin));
}

// What would settle an inconclusive result: the most seeds any inconclusive value needs.
std::string seeds_to_settle(const std::vector<Check>& checks) {
  double most = 0;
  for (const Check& check : checks) {
    if (check.id.rfind("seeds_", 0) != 0 || check.status != CheckStatus::kWarn) continue;
    for (const Figure& figure : check.figures) {
      if (figure.name != "seeds_needed") continue;
      if (figure.value < 0) return "No count of seeds up to 100,000 would settle it.";
      most = std::max(most, figure.value);
    }
  }
  return fmt::format("About {:.0f} seeds per producer would settle it (TOST power 80%).", most);
}

std::string headline_for(const ComparisonResult& result, const std::vector<std::string>& incomplete,
                         size_t n_a, size_t n_b) {
  const std::string counts = fmt::format("{} seeds of A and {} of B", n_a, n_b);
  if (result.verdict == Verdict::kIncomplete) {
    return fmt::format("Incomplete: {}; the distributions hold the finished runs only.",
                       fmt::join(incomplete, "; "));
  }
  std::vector<std::string> clauses;
  for (const SeedDistribution& d : result.seed_distributions) {
    const bool matches = (result.verdict == Verdict::kEquivalent && d.verdict == "equivalent") ||
                         (result.verdict == Verdict::kNotEquivalent && d.verdict == "different") ||
                         (result.verdict == Verdict::kInconclusive && d.verdict == "inconclusive");
    if (matches) clauses.push_back(distribution_clause(d));
  }
  const auto case_check = std::find_if(result.checks.begin(), result.checks.end(),
                                       [](const Check& c) { return c.id == "case"; });
  std::string differing;
  if (case_check != result.checks.end() && !case_check->details.empty()) {
    differing = fmt::format(" The sets' cases differ in {}.",
                            fmt::join(differing_key_names(case_check->details), ", "));
  }
  switch (result.verdict) {
    case Verdict::kEquivalent:
      return fmt::format("Equivalent over {}: {}.{}", counts, fmt::join(clauses, "; "), differing);
    case Verdict::kInconclusive:
      return fmt::format("Inconclusive over {}: {}: the interval crosses the margin. {}{}", counts,
                         fmt::join(clauses, "; "), seeds_to_settle(result.checks), differing);
    case Verdict::kNotEquivalent:
    case Verdict::kIncomplete:
      break;
  }
  if (clauses.empty()) {  // a check other than the distributions failed: the RNG streams
    for (const Check& check : result.checks) {
      if (check.status == CheckStatus::kFail) {
        return fmt::format("Not equivalent over {}: {}{}", counts, check.summary, differing);
      }
    }
  }
  return fmt::format("Different over {}: {}.{}", counts, fmt::join(clauses, "; "), differing);
}

// "seed-10" after "seed-2": names compared as text with runs of digits compared as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t end_i = i;
      size_t end_j = j;
      while (end_i < a.size() && std::isdigit(static_cast<unsigned char>(a[end_i]))) ++end_i;
      while (end_j < b.size() && std::isdigit(static_cast<unsigned char>(b[end_j]))) ++end_j;
      const std::string digits_a = a.substr(i, end_i - i);
      const std::string digits_b = b.substr(j, end_j - j);
      if (digits_a.size() != digits_b.size()) return digits_a.size() < digits_b.size();
      if (digits_a != digits_b) return digits_a < digits_b;
      i = end_i;
      j = end_j;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

std::vector<std::filesystem::path> seed_set_runs(const std::filesystem::path& folder) {
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    throw InputError(fmt::format(
        "{}: not a folder; a seed set is a folder with one run directory per seed (parity run "
        "--seeds writes OUT/CASE/seeds/pmap and OUT/CASE/seeds/ddp)",
        folder.string()));
  }
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "run.json")) {
      runs.push_back(entry.path());
    }
  }
  std::sort(runs.begin(), runs.end(), [](const auto& x, const auto& y) {
    return natural_less(x.filename().string(), y.filename().string());
  });
  if (runs.size() < 2) {
    throw InputError(fmt::format(
        "{}: holds {} run director{} (a subfolder with a run.json); a comparison over seeds "
        "needs at least 2 per producer",
        folder.string(), runs.size(), runs.size() == 1 ? "y" : "ies"));
  }
  return runs;
}

ComparisonResult compare_seed_sets(const std::vector<RunDir>& a, const std::vector<RunDir>& b,
                                   const SeedSetOptions& options) {
  check_set(a, 'A');
  check_set(b, 'B');
  const std::vector<SeedMetric> metrics = metrics_to_judge(a, b);
  if (metrics.empty()) {
    throw InputError(fmt::format(
        "no final value to judge: not every finished run of both sets records test_loss, "
        "test_accuracy or final_loss in run.json's results (for example {})",
        run_json(a.front())));
  }
  ComparisonResult result;
  result.a = summarize_run("A", a.front());
  result.b = summarize_run("B", b.front());
  result.a.dir = a.front().dir.parent_path().string();
  result.b.dir = b.front().dir.parent_path().string();
  result.loss_tolerance.source = result.tensor_tolerance.source =
      "not used: runs over seeds are judged by their final values' distributions";
  result.checks.push_back(check_sets_case(a, b, options));
  for (const SeedMetric& metric : metrics) {
    EquivalenceOptions test;
    test.margin = margin_for(metric, b.front(), options);
    test.alpha = options.alpha;
    SeedDistribution distribution;
    result.checks.push_back(check_seed_metric(metric, values_of(a, metric.name),
                                              values_of(b, metric.name), test, distribution));
    result.seed_distributions.push_back(std::move(distribution));
  }
  result.checks.push_back(check_seed_pairs_rng(a, b, result.diagnoses));
  std::vector<std::string> incomplete = incomplete_runs(a, 'A');
  const std::vector<std::string> incomplete_b = incomplete_runs(b, 'B');
  incomplete.insert(incomplete.end(), incomplete_b.begin(), incomplete_b.end());
  result.verdict = decide(result, !incomplete.empty());
  result.headline = headline_for(result, incomplete, a.size(), b.size());
  result.parity_version = PARITY_VERSION;
  result.generated_at = utc_timestamp_now();
  return result;
}

ComparisonResult compare_seed_set_dirs(const std::vector<std::filesystem::path>& a,
                                       const std::vector<std::filesystem::path>& b,
                                       const SeedSetOptions& options) {
  const auto read_all = [](const std::vector<std::filesystem::path>& dirs) {
    std::vector<RunDir> runs;
    for (const std::filesystem::path& dir : dirs) runs.push_back(read_run_dir(dir));
    return runs;
  };
  return compare_seed_sets(read_all(a), read_all(b), options);
}

}  // namespace parity::compare
