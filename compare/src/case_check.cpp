// Same case: two runs are only worth comparing step by step when they trained the same scenario.
// The case hash (FNV-1a of the canonical TOML, overrides applied) says whether they did; when
// not, the keys that differ say how. A different case warns by default (comparing a 10-step run
// with the first 10 steps of a 200-step one is legitimate) and fails with require_same_case.
#include <fmt/format.h>

#include <set>

#include "case_toml.h"
#include "checks.h"

namespace parity::compare {
namespace {

std::vector<std::string> differing_keys(const RunPair& runs) {
  const std::map<std::string, std::string> keys_a = case_keys(runs.a);
  const std::map<std::string, std::string> keys_b = case_keys(runs.b);
  std::set<std::string> names;
  for (const auto& [name, value] : keys_a) names.insert(name);
  for (const auto& [name, value] : keys_b) names.insert(name);
  std::vector<std::string> lines;
  for (const std::string& name : names) {
    const auto a = keys_a.find(name);
    const auto b = keys_b.find(name);
    const std::string value_a = a == keys_a.end() ? "(absent)" : a->second;
    const std::string value_b = b == keys_b.end() ? "(absent)" : b->second;
    if (value_a != value_b) lines.push_back(fmt::format("{}: A {}, B {}", name, value_a, value_b));
  }
  return lines;
}

}  // namespace

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
  check.details = differing_keys(runs);
  std::string keys;
  for (const std::string& line : check.details) {
    if (!keys.empty()) keys += ", ";
    keys += line.substr(0, line.find(':'));
  }
  check.summary = fmt::format(
      "The runs trained different cases (A: {} hash {}, B: {} hash {}){}.", a.case_name,
      a.case_hash, b.case_name, b.case_hash,
      keys.empty() ? "" : fmt::format("; {} key(s) differ: {}", check.details.size(), keys));
  return check;
}

}  // namespace parity::compare
