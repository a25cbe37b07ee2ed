#include "case_errors.h"

#include <algorithm>
#include <optional>

#include "parity/common/error.h"

namespace parity {

namespace {

// Optimal string alignment distance (Levenshtein plus adjacent transposition, so "trian" is one
// edit from "train").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The closest candidate if it is a plausible typo: one edit for short words, a third of the
// word (at least two edits) for longer ones.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& names) {
  const size_t max_edits = word.size() <= 3 ? 1 : std::max<size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  size_t best_edits = max_edits + 1;
  for (const std::string& name : names) {
    const size_t edits = edit_distance(word, name);
    if (edits < best_edits) {
      best = name;
      best_edits = edits;
    }
  }
  return best;
}

}  // namespace

std::string describe(const Origin& origin) {
  if (origin.override_text.empty()) return origin.file_position;
  const std::string text = origin.override_list + " " + origin.override_text;
  return origin.file_position.empty() ? text : text + " (" + origin.file_position + ")";
}

Origin KeyOrigins::of(const case_schema::Key& key) const {
  auto found = origins_.find(&key);
  return found != origins_.end() ? found->second : Origin{file_.string(), ""};
}

Origin KeyOrigins::of(const case_schema::Key& key, size_t index) const {
  auto found = element_origins_.find({&key, index});
  return found != element_origins_.end() ? found->second : of(key);
}

void fail_at(const Origin& origin, const std::string& problem, const std::string& hint) {
  std::string message;
  if (!origin.override_text.empty()) {
    // A long override (200,000 widths) is cut: the message names it, it need not repeat it.
    constexpr size_t kShown = 100;
    const std::string& text = origin.override_text;
    message = origin.override_list + " " +
              (text.size() <= kShown ? text
                                     : text.substr(0, kShown) + "... (" +
                                           std::to_string(text.size()) + " characters)") +
              ": " + problem +
              (origin.file_position.empty() ? "" : " at " + origin.file_position);
  } else {
    message = problem + (origin.file_position.empty() ? "" : " at " + origin.file_position);
  }
  if (!hint.empty()) message += "; " + hint;
  throw InputError(message);
}

std::string join(const std::vector<std::string>& names, const char* separator) {
  std::string text;
  for (const std::string& name : names) {
    if (!text.empty()) text += separator;
    text += name;
  }
  return text;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names,
                         const char* open, const char* close) {
  const std::optional<std::string> guess = closest(word, names);
  if (!guess) return "";
  return std::string("did you mean ") + open + *guess + close + "?";
}

void fail_unknown_section(const Origin& origin, const std::string& name) {
  const std::vector<std::string> names = case_schema::section_names();
  const std::string guess = did_you_mean(name, names, "[", "]");
  fail_at(origin, "unknown section [" + name + "]",
          guess.empty() ? "the sections are [" + join(names, "], [") + "]" : guess);
}

void fail_unknown_key(const Origin& origin, const case_schema::SectionEntry& section,
                      const std::string& name) {
  const std::vector<std::string> names = case_schema::key_names(section);
  const std::string section_name(section.section->name);
  const std::string guess = did_you_mean(name, names);
  fail_at(origin, "unknown key '" + name + "' in [" + section_name + "]",
          guess.empty() ? "the keys of [" + section_name + "] are " + join(names) : guess);
}

}  // namespace parity
