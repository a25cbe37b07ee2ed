#include "catalogue_content.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace parity::reports {

using compare::CheckStatus;

const char* to_string(CaseOutcome outcome) {
  switch (outcome) {
    case CaseOutcome::kAsExpected:
      return "as expected";
    case CaseOutcome::kDiffers:
      return "differs";
    case CaseOutcome::kNotSupported:
      return "not yet supported";
  }
  return "unknown";
}

bool catalogue_passes(const std::vector<CatalogueEntry>& entries) {
  return std::none_of(entries.begin(), entries.end(), [](const CatalogueEntry& entry) {
    return entry.outcome == CaseOutcome::kDiffers;
  });
}

const char* catalogue_banner(const std::vector<CatalogueEntry>& entries) {
  return catalogue_passes(entries) ? "CATALOGUE PASSES" : "CATALOGUE FAILS";
}

CheckStatus outcome_as_status(CaseOutcome outcome) {
  switch (outcome) {
    case CaseOutcome::kAsExpected:
      return CheckStatus::kPass;
    case CaseOutcome::kDiffers:
      return CheckStatus::kFail;
    case CaseOutcome::kNotSupported:
      return CheckStatus::kNotRecorded;
  }
  return CheckStatus::kNotRecorded;
}

std::vector<OutcomeCount> outcome_counts(const std::vector<CatalogueEntry>& entries) {
  std::vector<OutcomeCount> counts;
  for (CaseOutcome outcome :
       {CaseOutcome::kAsExpected, CaseOutcome::kDiffers, CaseOutcome::kNotSupported}) {
    const auto count = std::count_if(entries.begin(), entries.end(),
                                     [&](const CatalogueEntry& e) { return e.outcome == outcome; });
    counts.push_back({outcome, static_cast<size_t>(count)});
  }
  return counts;
}

std::string catalogue_headline(const std::vector<CatalogueEntry>& entries) {
  const size_t total = entries.size();
  if (total == 0) return "No scenario case was run.";
  const auto cases = [](size_t n) { return fmt::format("{} case{}", n, n == 1 ? "" : "s"); };
  std::vector<std::string> differing;
  size_t unsupported = 0;
  for (const CatalogueEntry& entry : entries) {
    if (entry.outcome == CaseOutcome::kDiffers) differing.push_back(entry.id);
    if (entry.outcome == CaseOutcome::kNotSupported) ++unsupported;
  }
  if (!differing.empty()) {
    return fmt::format("{} of {} did not behave as expected: {}.", differing.size(), cases(total),
                       fmt::join(differing, ", "));
  }
  if (unsupported == 0) {
    return total == 1 ? "The one case behaves as expected."
                      : fmt::format("All {} behave as expected.", cases(total));
  }
  return fmt::format("{} of {} behave as expected; {} an engine feature not built yet.",
                     total - unsupported, cases(total),
                     unsupported == 1 ? "1 needs" : fmt::format("{} need", unsupported));
}

std::string verdict_tally(const std::vector<CatalogueEntry>& entries) {
  std::vector<std::pair<std::string, size_t>> counts;
  for (const CatalogueEntry& entry : entries) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& count) { return count.first == entry.verdict; });
    if (it == counts.end()) {
      counts.emplace_back(entry.verdict, 1);
    } else {
      ++it->second;
    }
  }
  std::string tally;
  for (const auto& [verdict, count] : counts) {
    tally += fmt::format("{}{} {}", tally.empty() ? "" : " · ", count, verdict);
  }
  return tally;
}

std::string verdict_class(const std::string& verdict) {
  std::string name = "verdict-";
  for (char c : verdict) name += c == ' ' ? '-' : c;
  return name;
}

const std::vector<std::string>& catalogue_columns() {
  static const std::vector<std::string> columns = {
      "case", "title", "claim", "verdict", "observed", "fact check", "expected", "outcome"};
  return columns;
}

std::optional<std::string> safe_report_link(const std::string& report_link) {
  if (report_link.empty() || report_link[0] == '/' || report_link[0] == '\\') return std::nullopt;
  const size_t first_segment_end = report_link.find_first_of("/?#");
  if (report_link.substr(0, first_segment_end).find(':') != std::string::npos) return std::nullopt;
  std::string link;
  for (char c : report_link) {
    const auto byte = static_cast<uint8_t>(c);
    const bool kept = (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
                      (byte >= '0' && byte <= '9') ||
                      std::string_view("-._~/%?#=+,;:@").find(c) != std::string_view::npos;
    link += kept ? std::string(1, c) : fmt::format("%{:02X}", byte);
  }
  return link;
}

}  // namespace parity::reports
