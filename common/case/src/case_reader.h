// Reading a case file: its TOML text, its structure (every section and key in the schema), and
// the values into a CaseSpec, each checked for its type and remembered with its origin
// (file:line:column, or the --set override that gave it).
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <string>

#include "case_errors.h"
#include "case_overrides.h"
#include "case_schema.h"
#include "parity/common/case_spec.h"

namespace parity {

// The case file parsed as TOML; a syntax error names file:line:column.
toml::table parse_case_file(const std::filesystem::path& file);
// The same for case text read elsewhere (run.json's), `file` naming it in errors.
toml::table parse_case_text(const std::string& text, const std::filesystem::path& file);

// Every section and key of `root` must be in the schema.
void check_structure(const toml::table& root, const std::filesystem::path& file);

// The (overridden) table into a CaseSpec: keys `root` lacks keep their defaults, a value of the
// wrong type or a negative seed is refused. `override_origins` names the override that set each
// value it set; `origins` receives where each value (and each element of a list) came from.
CaseSpec read_case(const toml::table& root, const std::filesystem::path& file,
                   const OverrideOrigins& override_origins, KeyOrigins& origins);

}  // namespace parity
