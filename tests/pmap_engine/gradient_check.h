// Checks a function's reverse-mode gradient against central finite differences, in f64:
// d f / d x_i ~ (f(x + h e_i) - f(x - h e_i)) / 2h. With h = 1e-6 the truncation error is
// O(h^2 f''') ~ 1e-12 and the rounding error O(eps_f64 |f| / h) ~ 1e-10, so agreement to
// 1e-6 (relative to the gradient's scale) leaves a wide margin for smooth functions.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "pmap_engine/transforms.h"

namespace pmap_engine::testing {

using ScalarFunction = std::function<Array(const std::vector<Array>&)>;

inline double evaluate(const ScalarFunction& fn, const std::vector<Array>& inputs) {
  return fn(inputs).item();
}

// `analytic` (one gradient per input) against central finite differences of `fn` at `inputs`.
// `inputs` must be f64 arrays; `fn` must return a 0-d array.
inline void expect_matches_finite_differences(const ScalarFunction& fn,
                                              const std::vector<Array>& inputs,
                                              const std::vector<Array>& analytic_grads,
                                              double tolerance = 1e-6) {
  const double h = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<double> analytic = analytic_grads[i].to_doubles();
    std::vector<double> values = inputs[i].to_doubles();
    ASSERT_EQ(analytic.size(), values.size()) << "input " << i;
    double scale = 1.0;
    for (double g : analytic) scale = std::max(scale, std::abs(g));
    for (size_t j = 0; j < values.size(); ++j) {
      auto shifted = [&](double delta) {
        std::vector<double> moved = values;
        moved[j] += delta;
        std::vector<Array> probe = inputs;
        probe[i] = Array::from_doubles(inputs[i].shape(), moved);
        return evaluate(fn, probe);
      };
      double numeric = (shifted(h) - shifted(-h)) / (2 * h);
      EXPECT_NEAR(analytic[j], numeric, tolerance * scale)
          << "d/d input " << i << " element " << j;
    }
  }
}

// value_and_grad of `fn` against finite differences.
inline void expect_gradients_match_finite_differences(const ScalarFunction& fn,
                                                      const std::vector<Array>& inputs,
                                                      double tolerance = 1e-6) {
  std::vector<size_t> argnums;
  std::vector<Tree> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    argnums.push_back(i);
    args.emplace_back(inputs[i]);
  }
  TreeFunction as_tree = [&](const std::vector<Tree>& tree_args) {
    std::vector<Array> arrays;
    for (const auto& arg : tree_args) arrays.push_back(arg.leaf());
    return Tree(fn(arrays));
  };
  Tree result = value_and_grad(as_tree, argnums)(args);
  const Tree& grads = result[1];
  std::vector<Array> analytic;
  for (size_t i = 0; i < inputs.size(); ++i) {
    analytic.push_back((inputs.size() == 1 ? grads : grads[i]).leaf());
  }
  expect_matches_finite_differences(fn, inputs, analytic, tolerance);
}

}  // namespace pmap_engine::testing
