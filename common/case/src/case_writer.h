// The canonical TOML text of a case (CaseSpec::to_toml, training_toml): every key of the chosen
// sections, defaults included, in canonical order (case_schema.h).
#pragma once

#include <functional>
#include <string>

#include "case_schema.h"
#include "parity/common/case_spec.h"

namespace parity {

// The shortest decimal that reads back as the same double, always with a '.' or an exponent so
// that TOML parses it as a float (1.0, not 1).
std::string format_float(double value);

// The sections `wanted` picks, each "[section]" and one "key = value" line per key, separated
// by blank lines.
std::string case_toml(const CaseSpec& spec,
                      const std::function<bool(const case_schema::Section&)>& wanted);

}  // namespace parity
