// Replica consistency: in data-parallel training every replica applies the same averaged update,
// so after every step all replicas hold bit-identical parameters. Producers record one FNV-1a 64
// digest of each replica's parameters per recorded step (replicas/param_digests); a replica whose
// digest differs from the majority's has drifted (pitfalls P4, P11). Equal digests across the two
// runs mean bit-identical parameters across engines, worth saying when it happens.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "checks.h"
#include "figures.h"

namespace parity::compare {
namespace {

using Digests = std::map<int64_t, std::vector<uint64_t>>;

// The digest most replicas hold (replica 0's on a tie, the replica DDP broadcasts from).
uint64_t majority_digest(const std::vector<uint64_t>& digests) {
  std::map<uint64_t, size_t> counts;
  for (uint64_t digest : digests) ++counts[digest];
  uint64_t majority = digests.front();
  for (const auto& [digest, count] : counts) {
    if (count > counts[majority]) majority = digest;
  }
  return majority;
}

struct RunReplicas {
  std::optional<ReplicaDivergence> first_divergence;
  std::vector<int64_t> divergent_steps;
};

RunReplicas examine_run(const std::string& label, const Digests& digests) {
  RunReplicas result;
  for (const auto& [step, replica_digests] : digests) {
    if (replica_digests.empty()) continue;
    const uint64_t majority = majority_digest(replica_digests);
    std::vector<int64_t> odd_replicas;
    for (size_t r = 0; r < replica_digests.size(); ++r) {
      if (replica_digests[r] != majority) odd_replicas.push_back(static_cast<int64_t>(r));
    }
    if (odd_replicas.empty()) continue;
    result.divergent_steps.push_back(step);
    if (!result.first_divergence) result.first_divergence = {label, step, odd_replicas};
  }
  return result;
}

std::string describe(const ReplicaDivergence& divergence, const Digests& digests) {
  const std::vector<uint64_t>& at_step = digests.at(divergence.step);
  return fmt::format(
      "run {}: at step {}, replica(s) {} of {} differ from the others (digest {:016x} "
      "vs the majority's {:016x})",
      divergence.run, divergence.step, format_steps(divergence.replicas, 8), at_step.size(),
      at_step[static_cast<size_t>(divergence.replicas.front())], majority_digest(at_step));
}

// Steps at which both runs' replicas agree and hold the same digest as each other.
std::vector<int64_t> bit_identical_steps(const Digests& a, const Digests& b) {
  std::vector<int64_t> steps;
  for (const auto& [step, digests_a] : a) {
    const auto found = b.find(step);
    if (found == b.end() || digests_a.empty() || found->second.empty()) continue;
    if (majority_digest(digests_a) == majority_digest(found->second)) steps.push_back(step);
  }
  return steps;
}

}  // namespace

Check check_replicas(const TensorScan& scan, Findings& findings) {
  Check check;
  check.id = "replicas";
  check.title = "Replica consistency";
  if (scan.digests_a.empty() && scan.digests_b.empty()) {
    check.status = CheckStatus::kNotRecorded;
    check.summary = "Neither run recorded replicas/param_digests at any step.";
    return check;
  }

  const RunReplicas run_a = examine_run("A", scan.digests_a);
  const RunReplicas run_b = examine_run("B", scan.digests_b);
  check.figures = {
      {"divergent_steps_a", static_cast<double>(run_a.divergent_steps.size()), ""},
      {"divergent_steps_b", static_cast<double>(run_b.divergent_steps.size()), ""},
  };
  for (const auto* run : {&run_a, &run_b}) {
    if (!run->first_divergence) continue;
    const Digests& digests = run == &run_a ? scan.digests_a : scan.digests_b;
    findings.divergences.push_back(*run->first_divergence);
    check.details.push_back(describe(*run->first_divergence, digests));
    const int64_t step = run->first_divergence->step;
    check.first_failing_step =
        check.first_failing_step ? std::min(*check.first_failing_step, step) : step;
  }

  std::vector<std::string> unrecorded;
  if (scan.digests_a.empty()) unrecorded.push_back("run A did not record replica digests");
  if (scan.digests_b.empty()) unrecorded.push_back("run B did not record replica digests");
  check.details.insert(check.details.end(), unrecorded.begin(), unrecorded.end());
  const std::vector<int64_t> identical = bit_identical_steps(scan.digests_a, scan.digests_b);
  if (!identical.empty()) {
    check.details.push_back("parameters bit-identical across the two runs at step(s) " +
                            format_steps(identical));
  }

  if (check.first_failing_step) {
    check.status = CheckStatus::kFail;
    check.summary = fmt::format("Replicas diverged; {}.", check.details.front());
  } else {
    check.status = CheckStatus::kPass;
    check.summary = fmt::format(
        "Every replica held bit-identical parameters at every recorded step (recorded steps: A "
        "{}, B {}).",
        scan.digests_a.size(), scan.digests_b.size());
  }
  return check;
}

}  // namespace parity::compare
