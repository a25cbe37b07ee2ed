// The words reports use for statuses and verdicts.
//
// They are the words of compare's to_string (result.h). reports keeps its own copy on purpose:
// it depends on compare's result types only, never on compare's implementation (docs/design.md,
// "Dependencies point one way"), so it links and is tested without it.
#pragma once

#include "parity/compare/result.h"

namespace parity::reports {

// "pass", "fail", "warn", "not recorded".
const char* status_label(compare::CheckStatus status);
// "equivalent", "not equivalent", "incomplete".
const char* verdict_label(compare::Verdict verdict);

}  // namespace parity::reports
