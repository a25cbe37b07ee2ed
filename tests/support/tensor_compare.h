// Element-wise comparisons of F32 host tensors, for tests that compare two engines' recorded
// gradients and parameters.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "parity/common/host_tensor.h"

namespace parity::testing {

inline double max_abs(const HostTensor& tensor) {
  double worst = 0;
  for (size_t i = 0; i < tensor.num_elements(); ++i) {
    worst = std::max(worst, std::abs(double(tensor.data_as<float>()[i])));
  }
  return worst;
}

inline double max_abs_difference(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  double worst = 0;
  for (size_t i = 0; i < std::min(a.num_elements(), b.num_elements()); ++i) {
    worst = std::max(worst, std::abs(double(a.data_as<float>()[i]) - b.data_as<float>()[i]));
  }
  return worst;
}

}  // namespace parity::testing
