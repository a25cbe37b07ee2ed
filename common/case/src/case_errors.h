// Errors about a case file: where a value came from (a file position, a --set override, or a
// default), the InputError that names it, and "did you mean" for names that are near misses.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "case_schema.h"

namespace parity {

// Where a value came from: a position in the case file ("f.toml:12:6"), an override
// ("train.lr=3e-4", from --set, or an entry of the case's scenario.engine_overrides), or
// nowhere (a default; then the file alone is named).
struct Origin {
  std::string file_position;  // "f.toml:12:6", or just "f.toml" for a default
  std::string override_text;  // "train.lr=3e-4" when the value came from an override
  // Which list the override came from; an engine override also keeps its file_position, the
  // entry's place in the case file.
  std::string override_list = "--set";
};

// The origin in a few words: "f.toml:12:6", "--set train.lr=3e-4", or
// "scenario.engine_overrides model.layers[2].momentum=0.99 (f.toml:40:3)".
std::string describe(const Origin& origin);

// The origin of each key's value, as the reader found it.
class KeyOrigins {
 public:
  explicit KeyOrigins(std::filesystem::path file) : file_(std::move(file)) {}
  void set(const case_schema::Key& key, Origin origin) { origins_[&key] = std::move(origin); }
  // Where element `index` of a list key was written.
  void set(const case_schema::Key& key, size_t index, Origin origin) {
    element_origins_[{&key, index}] = std::move(origin);
  }
  // The bare file name for a key the file and the overrides did not set (a default).
  Origin of(const case_schema::Key& key) const;
  // Element `index` of a list key; the key's own origin when the element's is not known.
  Origin of(const case_schema::Key& key, size_t index) const;

 private:
  std::filesystem::path file_;
  std::map<const case_schema::Key*, Origin> origins_;
  std::map<std::pair<const case_schema::Key*, size_t>, Origin> element_origins_;
};

// Throws InputError. Value errors read "train.lr: expected a float, found a string at
// f.toml:12:6"; an override puts its list and text first: "--set train.lr=x: train.lr: expected
// ...", "scenario.engine_overrides train.lr=x: train.lr: expected ... at f.toml:40:3". A hint
// follows after "; ".
[[noreturn]] void fail_at(const Origin& origin, const std::string& problem,
                          const std::string& hint = "");

std::string join(const std::vector<std::string>& names, const char* separator = ", ");

// "did you mean 'lr'?" when one of `names` is a plausible typo of `word`, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& names,
                         const char* open = "'", const char* close = "'");

// An unknown name gets a "did you mean" for a near miss, else the list of valid names.
[[noreturn]] void fail_unknown_section(const Origin& origin, const std::string& name);
[[noreturn]] void fail_unknown_key(const Origin& origin, const case_schema::SectionEntry& section,
                                   const std::string& name);

}  // namespace parity
