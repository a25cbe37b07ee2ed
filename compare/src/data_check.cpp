// Data order: both engines must train on the same global batch at every step (S6: DDP's
// DistributedSampler gives rank r the ids perm[r::world]; a pmap input pipeline must give device
// d the same ones). Producers record a digest of the step's global sample ids, rank-major, one
// of them sorted (the set), and optionally one per replica. Equal ordered digests mean the same
// ids in the same order; equal sets alone mean the same global batch held by the replicas in
// another assignment, as after a restore on another device count (S10). The mean loss and the
// averaged gradient of a step depend only on the set (up to float rounding), so that passes,
// and the check says so.
#include <fmt/format.h>

#include "checks.h"
#include "figures.h"

namespace parity::compare {
namespace {

// The first replica whose samples differ at this step; nullopt when they agree or either run
// did not record per-replica digests (or recorded different counts).
std::optional<size_t> first_differing_replica(const StepPair& pair) {
  const std::vector<std::string>& a = pair.a->replica_samples;
  const std::vector<std::string>& b = pair.b->replica_samples;
  if (a.empty() || a.size() != b.size()) return std::nullopt;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r] != b[r]) return r;
  }
  return std::nullopt;
}

}  // namespace

Check check_data(const RunPair& runs, Findings& findings) {
  Check check;
  check.id = "data";
  check.title = "Data order";
  std::vector<int64_t> differing_steps;
  std::vector<int64_t> reassigned_steps;
  int64_t steps_compared = 0;
  for (const StepPair& pair : runs.common) {
    const std::string& a = pair.a->samples_digest;
    const std::string& b = pair.b->samples_digest;
    if (a.empty() || b.empty()) continue;
    ++steps_compared;
    if (a == b) continue;
    const std::string& set_a = pair.a->samples_set_digest;
    if (!set_a.empty() && set_a == pair.b->samples_set_digest) {
      reassigned_steps.push_back(pair.step());
      continue;
    }
    differing_steps.push_back(pair.step());
    const std::optional<int64_t>& repeats_a = pair.a->duplicate_samples;
    const std::optional<int64_t>& repeats_b = pair.b->duplicate_samples;
    if (!findings.first_duplicate_excess && repeats_a && repeats_b && *repeats_a != *repeats_b) {
      const bool a_more = *repeats_a > *repeats_b;
      findings.first_duplicate_excess = {pair.step(), a_more ? 'A' : 'B',
                                         a_more ? *repeats_a : *repeats_b,
                                         a_more ? *repeats_b : *repeats_a};
      check.details.push_back(fmt::format(
          "step {}: run {} repeats {} samples within its global batch, run {} {}", pair.step(),
          a_more ? 'A' : 'B', a_more ? *repeats_a : *repeats_b, a_more ? 'B' : 'A',
          a_more ? *repeats_b : *repeats_a));
    }
    if (differing_steps.size() > 1) continue;
    std::string line = fmt::format("step {}: samples digest A {} vs B {}", pair.step(), a, b);
    if (const auto replica = first_differing_replica(pair)) {
      line += fmt::format("; replica {} is the first to read other samples", *replica);
    }
    check.details.push_back(line);
  }

  if (steps_compared == 0) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = "No step has a samples digest in both runs.";
    return check;
  }
  check.figures = {
      {"steps_compared", static_cast<double>(steps_compared), ""},
      {"steps_differing", static_cast<double>(differing_steps.size()), ""},
      {"steps_reassigned", static_cast<double>(reassigned_steps.size()), ""},
  };
  if (!reassigned_steps.empty()) {
    check.details.push_back("steps whose global batch the replicas hold in another order or "
                            "assignment: " +
                            format_steps(reassigned_steps, 20));
  }
  if (differing_steps.empty()) {
    check.status = CheckStatus::kPass;
    check.summary =
        reassigned_steps.empty()
            ? fmt::format("Same global sample ids at all {} steps compared.", steps_compared)
            : fmt::format("Same global samples at all {} steps compared; at {} of them, first at "
                          "step {}, the replicas hold them in another order or assignment (another "
                          "device count or sampler layout).",
                          steps_compared, reassigned_steps.size(), reassigned_steps.front());
    return check;
  }
  findings.first_sample_mismatch = differing_steps.front();
  check.status = CheckStatus::kFail;
  check.first_failing_step = differing_steps.front();
  check.summary =
      fmt::format("The runs read different samples at {} of {} steps, first at step {}.",
                  differing_steps.size(), steps_compared, differing_steps.front());
  check.details.push_back("steps with different samples: " + format_steps(differing_steps, 20));
  return check;
}

}  // namespace parity::compare
