// The case the engine producer trains: the case with its scenario.engine_overrides on top
// (case_spec.h, engine_case). Loading a case builds it once to check the overrides, naming each
// entry's place in the case file.
#pragma once

#include <vector>

#include "case_errors.h"
#include "parity/common/case_spec.h"

namespace parity {

// Each entry of spec.scenario.engine_overrides as an override, with where it was written.
std::vector<Origin> engine_override_origins(const CaseSpec& spec, const KeyOrigins& origins);

// `spec` with `overrides` applied to its canonical text, read and checked as a case file is;
// InputError naming the override that breaks a rule.
CaseSpec apply_engine_overrides(const CaseSpec& spec, const std::vector<Origin>& overrides);

}  // namespace parity
