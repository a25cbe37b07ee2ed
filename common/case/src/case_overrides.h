// Overrides of a case file's values: `--set section.key=value` on the command line, and the
// case's own scenario.engine_overrides (the settings the engine producer trains with). Both use
// one grammar:
//
//   section.key=value                       any key of the schema (train.lr=3e-4)
//   model.layers[i].key=value               a key of layer i (model.layers[2].momentum=0.99)
//   model.layers[i].layers[j].key=value     a key of layer j of residual i's branch; likewise
//   model.layers[i].projection[j].key=value   its shortcut, and deeper for nested residuals
//
// Layers are counted from 0 in the order the case lists them (docs/model-layers.md).
#pragma once

#include <toml++/toml.h>

#include <string>
#include <utility>
#include <vector>

#include "case_errors.h"
#include "case_schema.h"

namespace parity {

// Which override set which value of a case, by the path it addressed: "train.lr",
// "model.layers[2].momentum" (the paths the layer reader names values by). Later ones win.
class OverrideOrigins {
 public:
  void add(std::string path, Origin origin);
  // The override that set the value at `path` or one holding it (a whole model.layers for
  // "model.layers[2].momentum"); else the last one that set a value inside it (for the layer
  // "model.layers[2]", its overridden momentum: a shape error in that layer names the override);
  // nullptr when every part of it is the case file's.
  const Origin* find(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, Origin>> entries_;  // in the order applied
};

// `--set` texts as overrides: each Origin's override_text is the text.
std::vector<Origin> command_line_overrides(const std::vector<std::string>& texts);

// Applies `overrides` (each text in its Origin's override_text) to `root` in order, the value
// parsed as TOML; a value that is not valid TOML (a bare word like sgd) is taken as a string,
// and so is any value given to a string key. An override that is not of the grammar above,
// names no key of the schema, a layer the model does not have or a key its kind does not take
// throws InputError naming the override and the fix. The values themselves are checked when
// the case is read (case_reader.h), naming the override that set them.
OverrideOrigins apply_overrides(toml::table& root, const std::vector<Origin>& overrides);

}  // namespace parity
