// Checking a case after reading: each key's rule (case_schema.h), the limits of what the
// producers can run (case_limits.h), and the rules that tie keys together.
#pragma once

#include "case_errors.h"
#include "parity/common/case_spec.h"

namespace parity {

// Refuses a case that breaks a rule, naming the key's origin. Also completes the case: a
// missing case.name becomes the file's stem, and train.record_steps is resolved (negative
// entries counted from the end, sorted, without repeats).
void check_case(CaseSpec& spec, const KeyOrigins& origins);

}  // namespace parity
