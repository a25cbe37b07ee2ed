// Case files: the public entry points. Loading reads the file (case_reader), applies the --set
// overrides (case_overrides) and checks the result (case_checker); the schema that all of them
// share is case_schema.h, the canonical TOML is written by case_writer. docs/case-schema.md
// documents the schema.
#include "parity/common/case_spec.h"

#include <algorithm>
#include <cstdlib>

#include "case_checker.h"
#include "case_files.h"
#include "case_overrides.h"
#include "case_reader.h"
#include "case_writer.h"
#include "engine_case.h"
#include "parity/common/case_limits.h"
#include "parity/common/digest.h"
#include "parity/common/error.h"

#ifndef PARITY_SOURCE_CASES_DIR
#error "parity_case must be compiled with PARITY_SOURCE_CASES_DIR (see common/case/CMakeLists.txt)"
#endif

namespace parity {

std::filesystem::path cases_dir() {
  const char* from_env = std::getenv("PARITY_CASES_DIR");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  return PARITY_SOURCE_CASES_DIR;
}

CaseSpec load_case(const std::string& name_or_path, const std::vector<std::string>& overrides) {
  const std::filesystem::path file = resolve_case_file(name_or_path);
  toml::table root = parse_case_file(file);
  check_structure(root, file);
  const OverrideOrigins override_origins =
      apply_overrides(root, command_line_overrides(overrides));
  KeyOrigins origins(file);
  CaseSpec spec = read_case(root, file, override_origins, origins);
  spec.source_file = file;
  check_case(spec, origins);
  // Last: the estimates assume the bounds above (case_limits.h) hold.
  check_case_resources(spec);
  // The engine's case must load too: its overrides are checked now, each error naming the
  // entry's place in the file, not when a run reaches the engine.
  apply_engine_overrides(spec, engine_override_origins(spec, origins));
  return spec;
}

CaseSpec case_from_text(const std::string& toml, const std::filesystem::path& origin) {
  const toml::table root = parse_case_text(toml, origin);
  check_structure(root, origin);
  KeyOrigins origins(origin);
  CaseSpec spec = read_case(root, origin, OverrideOrigins(), origins);
  check_case(spec, origins);
  return spec;
}

std::vector<CaseSpec> list_cases() {
  const std::filesystem::path dir = cases_dir();
  if (!std::filesystem::is_directory(dir)) {
    throw InputError("cases folder " + dir.string() +
                     " not found; set PARITY_CASES_DIR to the folder holding the *.toml cases");
  }
  std::vector<CaseSpec> cases;
  for (const std::string& name : available_case_names(dir)) {
    cases.push_back(load_case((dir / (name + ".toml")).string()));
  }
  std::sort(cases.begin(), cases.end(),
            [](const CaseSpec& a, const CaseSpec& b) { return a.name < b.name; });
  return cases;
}

std::string CaseSpec::hash() const { return Fnv1a64().update(training_toml()).hex(); }

std::string CaseSpec::to_toml() const {
  return case_toml(*this, [&](const case_schema::Section& section) {
    return &section != &case_schema::kScenario || !scenario.id.empty();
  });
}

std::string CaseSpec::training_toml() const {
  return case_toml(*this, [](const case_schema::Section& section) { return section.hashed; });
}

}  // namespace parity
