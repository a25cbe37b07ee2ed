// `--set section.key=value` overrides of a case file's values.
#pragma once

#include <toml++/toml.h>

#include <map>
#include <string>
#include <vector>

#include "case_schema.h"

namespace parity {

// Applies `overrides` to `root` in order, each "section.key=value" with the value parsed as
// TOML; a value that is not valid TOML (a bare word like sgd) is taken as a string, and so is any
// value given to a string key. Returns the text of the override that set each key (the last).
// An override that is not of that form, or names no key of the schema, throws InputError.
std::map<const case_schema::Key*, std::string> apply_overrides(
    toml::table& root, const std::vector<std::string>& overrides);

}  // namespace parity
