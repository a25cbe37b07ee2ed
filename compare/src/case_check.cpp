// Same case: two runs are only worth comparing step by step when they trained the same scenario.
// The case hash (FNV-1a of the canonical TOML, overrides applied) says whether they did; when
// not, the keys that differ say how. A different case warns by default (comparing a 10-step run
// with the first 10 steps of a 200-step one is legitimate) and fails with require_same_case.
#include <fmt/format.h>

#include "case_toml.h"
#include "checks.h"

namespace parity::compare {

Check check_case(const RunPair& runs, const CompareOptions& options) {
  Check check;
  check.id = "case";
  check.title = "Same case";
  const RunInfo& a = runs.a.info;
  const RunInfo& b = runs.b.info;
  if (a.case_hash == b.case_hash) {
    check.status = CheckStatus::kPass;
    check.summary = fmt::format("Both runs trained case {} (hash {}).", a.case_name, a.case_hash);
    return check;
  }
  check.status = options.require_same_case ? CheckStatus::kFail : CheckStatus::kWarn;
  check.details = differing_case_keys(case_keys(runs.a), case_keys(runs.b));
  check.summary = fmt::format(
      "The runs trained different cases (A: {} hash {}, B: {} hash {}){}.", a.case_name,
      a.case_hash, b.case_name, b.case_hash,
      check.details.empty()
          ? ""
          : fmt::format("; {} key(s) differ: {}", check.details.size(),
                        fmt::join(differing_key_names(check.details), ", ")));
  return check;
}

}  // namespace parity::compare
