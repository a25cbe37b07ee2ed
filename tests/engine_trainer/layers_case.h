// Layers cases for the tests of the engine's layer model: a case file written into a test's
// temporary directory, and comparisons of engine arrays with expected values.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "pmap_engine/array.h"
#include "test_files.h"

namespace parity::engine_trainer::testing {

// A fashion-mnist case (28x28x1 images) whose [model] layers are `layers` (the entries of the
// list, one per line), with `sections` (further TOML sections) after it.
inline CaseSpec layers_case(const parity::testing::TempDir& dir, const std::string& layers,
                            const std::string& sections = "") {
  const auto file = dir.path("layers.toml");
  parity::testing::write_bytes(file, "[case]\nname = \"layers\"\n\n[model]\ninput = [28, 28, 1]\n"
                                     "layers = [\n" + layers + "]\n\n" + sections);
  return load_case(file.string());
}

// |actual - expected| <= tolerance * max(1, |expected|) for every element.
inline void expect_close(const pmap_engine::Array& actual, const std::vector<double>& expected,
                         double tolerance, const std::string& what) {
  const std::vector<double> values = actual.to_doubles();
  ASSERT_EQ(values.size(), expected.size()) << what;
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(values[i], expected[i], tolerance * std::max(1.0, std::abs(expected[i])))
        << what << " element " << i;
  }
}

}  // namespace parity::engine_trainer::testing
