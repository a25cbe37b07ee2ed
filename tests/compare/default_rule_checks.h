// What the tests of the framework defaults' rules (compare/src/default_rules.h) share: the ids
// of the rules that match two run directories, each rule on its own, and a figure read back
// from a diagnosis' evidence.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "parity/compare/compare.h"

namespace parity::compare {

using Ids = std::vector<std::string>;

inline Ids matching(const std::filesystem::path& a, const std::filesystem::path& b) {
  return matching_default_rules(read_run_dir(a), read_run_dir(b), CompareOptions{});
}

// The number after `label` in `text` ("lambda = 0.00935" -> 0.00935).
inline double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  EXPECT_NE(at, std::string::npos) << "no \"" << label << "\" in: " << text;
  return at == std::string::npos ? 0 : std::stod(text.substr(at + label.size()));
}

}  // namespace parity::compare
