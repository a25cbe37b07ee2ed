#include "labels.h"

namespace parity::reports {

using compare::CheckStatus;
using compare::Verdict;

const char* status_label(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kNotRecorded:
      return "not recorded";
  }
  return "unknown";
}

const char* verdict_label(Verdict verdict) {
  switch (verdict) {
    case Verdict::kEquivalent:
      return "equivalent";
    case Verdict::kNotEquivalent:
      return "not equivalent";
    case Verdict::kIncomplete:
      return "incomplete";
  }
  return "unknown";
}

}  // namespace parity::reports
