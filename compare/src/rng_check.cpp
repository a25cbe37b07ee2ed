// RNG streams: what every dropout site drew on every replica at every step (rng.jsonl,
// rng_streams.h). Within each run:
//   - replicas draw independently: no two replicas' masks at a step and site are identical, and
//     their agreement over the recorded prefix is what independent draws give, q = p^2 + (1-p)^2
//     with p = 1 - rate, within kZBound binomial standard deviations (P5, R1);
//   - steps draw afresh: no replica repeats a mask at a site across steps (R2);
//   - each site keeps 1 - rate of its elements, within kZBound standard deviations over the run.
//   - every recorded key is the one the run's case derives (rng_derivation.h).
// Across the runs, a draw made from the same key on both sides must give the same mask: the
// producers declare the same stream (ddp_ref's rng = "threefry") and must draw bit-identical
// masks. Streams from different generators (torch's and threefry) can only agree in
// distribution: `parity run --seeds` judges those runs statistically.
#include <fmt/format.h>

#include <bitset>
#include <cmath>
#include <map>

#include "checks.h"
#include "figures.h"
#include "rng_derivation.h"

namespace parity::compare {
namespace {

// Six binomial standard deviations: a false alarm has probability ~2e-9 per comparison, so a
// 200-step run of 8 replicas at 4 sites (22,400 replica pairs) stays below 1e-4 overall, while
// identical masks sit 30 (rate 0.1) to 64 (rate 0.5) deviations out on a 4,096-bit prefix.
constexpr double kZBound = 6.0;

struct SiteDraws {  // one step and site: the draws by replica
  int64_t step = 0;
  std::string site;
  std::vector<const MaskDraw*> replicas;
};

std::vector<SiteDraws> group_by_step_and_site(const std::vector<MaskDraw>& draws) {
  std::vector<SiteDraws> groups;
  for (const MaskDraw& draw : draws) {  // sorted by step, site, replica
    if (groups.empty() || groups.back().step != draw.step || groups.back().site != draw.site) {
      groups.push_back({draw.step, draw.site, {}});
    }
    groups.back().replicas.push_back(&draw);
  }
  return groups;
}

int64_t prefix_elements(const MaskDraw& draw) { return std::min(draw.size, kMaskPrefixBits); }

int64_t agreeing_elements(const MaskDraw& a, const MaskDraw& b) {
  const int64_t n = prefix_elements(a);
  int64_t disagreeing = 0;
  for (size_t byte = 0; byte < a.prefix.size(); ++byte) {
    disagreeing += static_cast<int64_t>(std::bitset<8>(a.prefix[byte] ^ b.prefix[byte]).count());
  }
  return n - disagreeing;
}

double expected_agreement(double rate) {
  const double keep = 1 - rate;
  return keep * keep + rate * rate;
}

// Standard deviations between `count` successes in `n` trials and a success probability `p`;
// 0 for p in {0, 1} when count matches exactly.
double binomial_z(double count, double n, double p) {
  const double spread = std::sqrt(n * p * (1 - p));
  if (spread == 0) return count == n * p ? 0.0 : HUGE_VAL;
  return (count - n * p) / spread;
}

std::string format_replicas(const std::vector<int64_t>& replicas) {
  return format_steps(replicas, 8);
}

struct RunStreams {
  char label = 'A';
  bool keyed = false;  // the producer recorded keys (threefry)
  int64_t pairs = 0;
  int64_t identical_pairs = 0;
  double worst_agreement_z = 0;
  int64_t repeated = 0;
  KeyDerivation derivation;
  std::vector<std::string> failures;  // one line each, worst kind first
};

void check_replica_independence(const std::vector<SiteDraws>& groups, RunStreams& run,
                                Findings& findings) {
  std::optional<std::string> first_correlated;
  for (const SiteDraws& group : groups) {
    const double rate = group.replicas.front()->rate;
    if (rate == 0) continue;
    std::map<std::string, std::vector<int64_t>> by_digest;
    for (const MaskDraw* draw : group.replicas) by_digest[draw->digest].push_back(draw->replica);
    for (const auto& [digest, replicas] : by_digest) {
      if (replicas.size() < 2) continue;
      run.identical_pairs += static_cast<int64_t>(replicas.size() * (replicas.size() - 1) / 2);
      if (findings.shared_replica_masks) continue;
      findings.shared_replica_masks = {run.label, group.step, group.site, replicas,
                                       prefix_elements(*group.replicas.front()),
                                       expected_agreement(rate), run.keyed};
      run.failures.push_back(fmt::format(
          "run {}: at step {}, site {}, replicas {} drew identical masks (100% agreement; "
          "independent draws at rate {} agree on {:.1f}%)",
          run.label, group.step, group.site, format_replicas(replicas), format_number(rate),
          100 * expected_agreement(rate)));
    }
    for (size_t i = 0; i < group.replicas.size(); ++i) {
      for (size_t j = i + 1; j < group.replicas.size(); ++j) {
        const MaskDraw& a = *group.replicas[i];
        const MaskDraw& b = *group.replicas[j];
        ++run.pairs;
        if (a.digest == b.digest) continue;
        const auto n = static_cast<double>(prefix_elements(a));
        const double z =
            binomial_z(static_cast<double>(agreeing_elements(a, b)), n, expected_agreement(rate));
        if (std::abs(z) > std::abs(run.worst_agreement_z)) run.worst_agreement_z = z;
        if (std::abs(z) > kZBound && !first_correlated) {
          first_correlated = fmt::format(
              "run {}: at step {}, site {}, replicas {} and {} agree on {:.1f}% of {} elements; "
              "independent draws agree on {:.1f}% ({:+.1f} standard deviations)",
              run.label, group.step, group.site, a.replica, b.replica,
              100 * static_cast<double>(agreeing_elements(a, b)) / n, n,
              100 * expected_agreement(rate), z);
        }
      }
    }
  }
  if (first_correlated) run.failures.push_back(*first_correlated);
}

void check_fresh_steps(const std::vector<MaskDraw>& draws, RunStreams& run, Findings& findings) {
  // (site, replica, digest) -> the first step that drew it.
  std::map<std::tuple<std::string, int64_t, std::string>, int64_t> first_step;
  for (const MaskDraw& draw : draws) {
    if (draw.rate == 0) continue;
    const auto [earlier, fresh] =
        first_step.emplace(std::make_tuple(draw.site, draw.replica, draw.digest), draw.step);
    if (fresh) continue;
    ++run.repeated;
    if (findings.repeated_mask) continue;
    findings.repeated_mask = {run.label, draw.site, draw.replica, draw.step, earlier->second,
                              run.keyed};
    run.failures.push_back(fmt::format(
        "run {}: replica {} drew the same mask at site {} in step {} as in step {}",
        run.label, draw.replica, draw.site, draw.step, earlier->second));
  }
}

void check_keep_rates(const std::vector<MaskDraw>& draws, RunStreams& run) {
  struct Totals {
    double rate = 0, kept = 0, size = 0;
  };
  std::map<std::string, Totals> sites;
  for (const MaskDraw& draw : draws) {
    Totals& totals = sites[draw.site];
    totals.rate = draw.rate;
    totals.kept += static_cast<double>(draw.kept);
    totals.size += static_cast<double>(draw.size);
  }
  for (const auto& [site, totals] : sites) {
    const double z = binomial_z(totals.kept, totals.size, 1 - totals.rate);
    if (std::abs(z) <= kZBound) continue;
    run.failures.push_back(fmt::format(
        "run {}: site {} kept {:.4f} of {} elements; rate {} keeps {:.4f} ({:+.1f} standard "
        "deviations)",
        run.label, site, totals.kept / totals.size, totals.size, format_number(totals.rate),
        1 - totals.rate, z));
  }
}

RunStreams examine_run(char label, const RunDir& run, Findings& findings) {
  RunStreams streams;
  streams.label = label;
  streams.keyed = !run.rng.empty() && run.rng.front().key.has_value();
  // First: keys other than the case's mean the producer drew another stream than it declares.
  streams.derivation = derive_recorded_keys(label, run);
  if (streams.derivation.first_mismatch) {
    streams.failures.push_back(*streams.derivation.first_mismatch);
  }
  check_replica_independence(group_by_step_and_site(run.rng), streams, findings);
  check_fresh_steps(run.rng, streams, findings);
  check_keep_rates(run.rng, streams);
  return streams;
}

struct CrossRun {
  int64_t common_draws = 0;     // (step, replica, site) in both runs
  int64_t equal_masks = 0;
  int64_t same_key_draws = 0;   // of them drawn from equal keys
  std::optional<std::string> first_same_key_mismatch;
};

CrossRun compare_streams(const RunDir& a, const RunDir& b) {
  std::map<std::tuple<int64_t, std::string, int64_t>, const MaskDraw*> in_b;
  for (const MaskDraw& draw : b.rng) in_b[{draw.step, draw.site, draw.replica}] = &draw;
  CrossRun cross;
  for (const MaskDraw& draw : a.rng) {
    const auto found = in_b.find({draw.step, draw.site, draw.replica});
    if (found == in_b.end()) continue;
    const MaskDraw& other = *found->second;
    ++cross.common_draws;
    if (draw.digest == other.digest) ++cross.equal_masks;
    if (!draw.key || draw.key != other.key) continue;
    ++cross.same_key_draws;
    if (draw.digest != other.digest && !cross.first_same_key_mismatch) {
      cross.first_same_key_mismatch = fmt::format(
          "at step {}, replica {}, site {} both runs drew from key [{}, {}] but their masks "
          "differ (A keeps {} of {}, B {} of {})",
          draw.step, draw.replica, draw.site, (*draw.key)[0], (*draw.key)[1], draw.kept,
          draw.size, other.kept, other.size);
    }
  }
  return cross;
}

bool is_parity_producer(const RunDir& run) {
  return run.info.producer == "ddp_ref" || run.info.producer == "pmap_engine";
}

std::string why_unrecorded(const RunDir& run, char label) {
  if (is_parity_producer(run)) {
    return fmt::format("run {} ({}) drew no random numbers in training: its model has no dropout "
                       "with a rate above 0",
                       label, run.info.producer);
  }
  return fmt::format("run {} ({}) brought no RNG streams (rng.jsonl): log the script's dropout "
                     "masks with log_dropout (interop/python) and import its log again",
                     label, run.info.producer);
}

// What the derivation part did for each examined run: the keys it recomputed and how many differ,
// or why it recomputed none.
std::string derivation_summary(const std::vector<RunStreams>& examined) {
  std::vector<std::string> parts;
  for (const RunStreams& run : examined) {
    const KeyDerivation& derivation = run.derivation;
    if (derivation.skipped) {
      parts.push_back(
          fmt::format("run {}'s keys not recomputed: {}", run.label, *derivation.skipped));
    } else if (derivation.mismatches == 0) {
      parts.push_back(fmt::format("all {} of run {}'s recorded keys recomputed from its case's "
                                  "[rng] with the host threefry, each equal",
                                  derivation.recomputed, run.label));
    } else {
      parts.push_back(fmt::format("{} of run {}'s {} recorded keys differ from its case's [rng] "
                                  "derivation",
                                  derivation.mismatches, run.label, derivation.recomputed));
    }
  }
  return fmt::format("Keys: {}.", fmt::join(parts, "; "));
}

}  // namespace

Check check_rng(const RunPair& runs, Findings& findings) {
  Check check;
  check.id = "rng";
  check.title = "RNG streams";
  const bool has_a = !runs.a.rng.empty();
  const bool has_b = !runs.b.rng.empty();
  if (!has_a && !has_b) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = fmt::format("Nothing to compare: {}; {}.", why_unrecorded(runs.a, 'A'),
                                why_unrecorded(runs.b, 'B'));
    return check;
  }
  std::vector<RunStreams> examined;
  if (has_a) examined.push_back(examine_run('A', runs.a, findings));
  if (has_b) examined.push_back(examine_run('B', runs.b, findings));
  for (const RunStreams& run : examined) {
    const std::string suffix(1, static_cast<char>(std::tolower(run.label)));
    check.figures.push_back({"replica_pairs_compared_" + suffix, static_cast<double>(run.pairs), ""});
    check.figures.push_back({"identical_replica_masks_" + suffix,
                             static_cast<double>(run.identical_pairs), ""});
    check.figures.push_back({"worst_agreement_z_" + suffix, run.worst_agreement_z, ""});
    check.figures.push_back({"repeated_masks_" + suffix, static_cast<double>(run.repeated), ""});
    if (!run.derivation.skipped) {
      check.figures.push_back({"keys_recomputed_" + suffix,
                               static_cast<double>(run.derivation.recomputed), ""});
      check.figures.push_back({"key_mismatches_" + suffix,
                               static_cast<double>(run.derivation.mismatches), ""});
    }
    check.details.insert(check.details.end(), run.failures.begin(), run.failures.end());
  }
  const CrossRun cross = compare_streams(runs.a, runs.b);
  check.figures.push_back({"masks_compared", static_cast<double>(cross.common_draws), ""});
  check.figures.push_back({"masks_equal", static_cast<double>(cross.equal_masks), ""});
  if (cross.first_same_key_mismatch) check.details.push_back(*cross.first_same_key_mismatch);
  const size_t failures = check.details.size();
  if (!has_a || !has_b) check.details.push_back(why_unrecorded(has_a ? runs.b : runs.a, has_a ? 'B' : 'A'));

  const std::string derivation = derivation_summary(examined);
  if (failures > 0) {
    check.status = CheckStatus::kFail;
    const auto failing_at = [&check](int64_t step) {
      check.first_failing_step = check.first_failing_step ? std::min(*check.first_failing_step, step) : step;
    };
    if (findings.shared_replica_masks) failing_at(findings.shared_replica_masks->step);
    if (findings.repeated_mask) failing_at(findings.repeated_mask->step);
    for (const RunStreams& run : examined) {
      if (run.derivation.first_mismatch_step) failing_at(*run.derivation.first_mismatch_step);
    }
    check.summary = fmt::format("RNG streams are wrong: {}. {}", check.details.front(), derivation);
    return check;
  }
  check.status = CheckStatus::kPass;
  const int64_t pairs = examined.front().pairs + (examined.size() > 1 ? examined.back().pairs : 0);
  std::string across;
  if (cross.common_draws > 0 && cross.equal_masks == cross.common_draws) {
    across = fmt::format(" The two runs drew bit-identical masks at all {} draws.", cross.common_draws);
  } else if (cross.common_draws > 0) {
    across = fmt::format(
        " The runs draw from different streams ({} of {} masks equal), as different generators "
        "do: judge them over seeds (parity run --seeds).",
        cross.equal_masks, cross.common_draws);
  }
  check.summary = fmt::format(
      "Replicas drew independent masks ({} replica pairs, agreement within {} standard "
      "deviations of independence), no mask repeated across steps, keep rates as declared.{} {}",
      pairs, format_number(kZBound), across, derivation);
  return check;
}

}  // namespace parity::compare
