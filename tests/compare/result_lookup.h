// Finding a check and a figure in a ComparisonResult by id and name, failing the test (not
// crashing it) when one is missing.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "parity/compare/compare.h"

namespace parity::testing {

inline const compare::Check& find_check(const compare::ComparisonResult& result,
                                        const std::string& id) {
  for (const compare::Check& check : result.checks) {
    if (check.id == id) return check;
  }
  ADD_FAILURE() << "no check \"" << id << "\" in the result";
  static const compare::Check missing;
  return missing;
}

// Whether the check states the figure (a check leaves out what it did not measure).
inline bool has_figure(const compare::Check& check, const std::string& name) {
  for (const compare::Figure& figure : check.figures) {
    if (figure.name == name) return true;
  }
  return false;
}

// The figure's value; NaN (and a test failure) when the check lacks it.
inline double figure(const compare::Check& check, const std::string& name) {
  for (const compare::Figure& figure : check.figures) {
    if (figure.name == name) return figure.value;
  }
  ADD_FAILURE() << "check \"" << check.id << "\" has no figure \"" << name << "\"";
  return std::numeric_limits<double>::quiet_NaN();
}

// Every detail line of the check, one per line, for substring assertions.
inline std::string all_details(const compare::Check& check) {
  std::string text;
  for (const std::string& line : check.details) text += line + "\n";
  return text;
}

}  // namespace parity::testing
