#include "parity/compare/result.h"

namespace parity::compare {

const char* to_string(CheckStatus status) {
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

const char* to_string(Verdict verdict) {
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

int exit_code(Verdict verdict) {
  switch (verdict) {
    case Verdict::kEquivalent:
      return 0;
    case Verdict::kNotEquivalent:
      return 1;
    case Verdict::kIncomplete:
      return 3;
  }
  return 3;
}

}  // namespace parity::compare
