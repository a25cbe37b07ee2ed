#include "engine_case.h"

#include "case_checker.h"
#include "case_overrides.h"
#include "case_reader.h"
#include "parity/common/case_limits.h"

namespace parity {
namespace {

const case_schema::Key& kEngineOverrides = case_schema::kScenarioEngineOverrides;

// An engine override sets what the engine trains: not the case's name, nor how the pair is
// judged ([compare], [scenario]), which one comparison shares.
void check_trained_section(const Origin& origin) {
  const std::string& text = origin.override_text;
  const std::string section = text.substr(0, text.find('.'));
  const bool judged = section == case_schema::kCompare.name ||
                      section == case_schema::kScenario.name;
  if (section == case_schema::kCase.name || judged) {
    fail_at(origin,
            "[" + section + "] is not part of what the engine trains; engine overrides set keys "
            "of [model], [data], [parallel], [train], [init], [rng] and [jax]",
            "set it in the case itself, for both producers");
  }
}

}  // namespace

std::vector<Origin> engine_override_origins(const CaseSpec& spec, const KeyOrigins& origins) {
  std::vector<Origin> overrides;
  const std::vector<std::string>& entries = spec.scenario.engine_overrides;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Origin written = origins.of(kEngineOverrides, i);
    // An entry from the file keeps its position; one from --set scenario.engine_overrides=[...]
    // is named by that override.
    overrides.push_back(Origin{written.file_position, entries[i],
                               written.override_text.empty()
                                   ? kEngineOverrides.dotted()
                                   : "--set " + kEngineOverrides.dotted() + " entry"});
  }
  return overrides;
}

CaseSpec apply_engine_overrides(const CaseSpec& spec, const std::vector<Origin>& overrides) {
  if (overrides.empty()) return spec;
  for (const Origin& origin : overrides) check_trained_section(origin);
  // The canonical text holds the case as loaded (its quick and --set overrides applied); a
  // position in it is not one in the file, so it is named for what it is.
  const std::filesystem::path text_name =
      spec.source_file.string() + " (canonical, with " + kEngineOverrides.dotted() + ")";
  toml::table root = parse_case_text(spec.to_toml(), text_name);
  const OverrideOrigins override_origins = apply_overrides(root, overrides);
  KeyOrigins origins(text_name);
  CaseSpec engine = read_case(root, text_name, override_origins, origins);
  check_case(engine, origins);
  check_case_resources(engine);
  engine.source_file = spec.source_file;
  return engine;
}

CaseSpec engine_case(const CaseSpec& spec) {
  KeyOrigins origins(spec.source_file);
  return apply_engine_overrides(spec, engine_override_origins(spec, origins));
}

}  // namespace parity
