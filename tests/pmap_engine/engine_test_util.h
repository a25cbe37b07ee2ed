// Helpers shared by the pmap_engine op tests: running a function of arrays under jit or as a
// printed program, test inputs and scalar losses for gradient checks, comparing with known
// answers, and catching the EngineError an op raises.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "pmap_engine/ops.h"
#include "pmap_engine/transforms.h"

namespace pmap_engine::testing {

using ArrayFunction = std::function<Array(const std::vector<Array>&)>;

// fn as a function of trees whose leaves are its arrays, as jit, grad and make_program take.
inline TreeFunction as_tree_function(ArrayFunction fn) {
  return [fn = std::move(fn)](const std::vector<Tree>& args) {
    std::vector<Array> arrays;
    for (const Tree& arg : args) arrays.push_back(arg.leaf());
    return Tree(fn(arrays));
  };
}

// fn under jit (traced, then executed as a program); returns its single output.
inline Array jitted(ArrayFunction fn, const std::vector<Array>& inputs) {
  std::vector<Tree> args(inputs.begin(), inputs.end());
  return jit(as_tree_function(std::move(fn)))(args).leaf();
}

// The program fn traces to on `inputs`, as text.
inline std::string program_of(ArrayFunction fn, const std::vector<Array>& inputs) {
  std::vector<Tree> args(inputs.begin(), inputs.end());
  return make_program(as_tree_function(std::move(fn)), args);
}

// A scalar that depends on every element of y with a distinct weight: sum(y * w), so that a
// gradient check sees each element's cotangent.
inline Array weighted_total(const Array& y) {
  std::vector<double> weights(y.num_elements());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.5 + 0.25 * static_cast<double>(i);
  return sum(y * Array::from_doubles(y.shape(), weights));
}

// The gradients of sum(fn(inputs) * g) with respect to every input: what torch's
// out.backward(g) leaves in each input's .grad.
inline std::vector<Array> weighted_sum_gradients(ArrayFunction fn, const std::vector<Array>& inputs,
                                                 const Array& g) {
  std::vector<size_t> argnums;
  for (size_t i = 0; i < inputs.size(); ++i) argnums.push_back(i);
  TreeFunction loss = [&](const std::vector<Tree>& args) {
    std::vector<Array> arrays;
    for (const Tree& arg : args) arrays.push_back(arg.leaf());
    return Tree(sum(fn(arrays) * g));
  };
  Tree grads = grad(loss, argnums)(std::vector<Tree>(inputs.begin(), inputs.end()));
  if (inputs.size() == 1) return {grads.leaf()};
  std::vector<Array> out;
  for (size_t i = 0; i < inputs.size(); ++i) out.push_back(grads[i].leaf());
  return out;
}

// Every element within tolerance * max(1, |expected|); failures name `what` and the index.
inline void expect_near_all(const std::vector<double>& actual, const std::vector<double>& expected,
                            double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::abs(expected[i])))
        << what << " index " << i;
  }
}

// Distinct, irregular f64 values: sin(seed + 1.7 i).
inline Array irregular(const Shape& shape, double seed = 0.3) {
  std::vector<double> values(shape_num_elements(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(seed + 1.7 * static_cast<double>(i));
  }
  return Array::from_doubles(shape, values);
}

// f32 values drawn from N(0, 1) by std::mt19937(seed).
inline Array normal_array(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(shape_num_elements(shape));
  for (float& value : values) value = normal(rng);
  return Array::from_floats(std::move(shape), values);
}

// f on args run op by op (DisableJit): each primitive's own kernel alone, the reference for
// what a compiled program must compute.
inline Tree op_by_op(const TreeFunction& f, const std::vector<Tree>& args) {
  DisableJit off;
  return f(args);
}

// Every leaf of `actual` holds the same bits as the same leaf of `expected`.
inline void expect_same_bits(const Tree& actual, const Tree& expected) {
  const std::vector<Array> a = actual.leaves();
  const std::vector<Array> b = expected.leaves();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Buffer& x = a[i].buffer();
    const Buffer& y = b[i].buffer();
    ASSERT_EQ(x.shape, y.shape) << "leaf " << i;
    EXPECT_EQ(std::memcmp(x.bytes->data(), y.bytes->data(), x.num_bytes()), 0)
        << "leaf " << i << " differs from the op-by-op result";
  }
}

// Two f32 evaluations of a sum of n terms, each by n - 1 additions in any order (a partial sum
// per device, then the all-reduce's), lie within gamma_n * sum|terms| of the exact sum,
// gamma_n = n u / (1 - n u) with u = 2^-24 (Higham, Accuracy and Stability of Numerical
// Algorithms, 2nd ed., §3.1 for a dot product, §4.2 for a sum): they differ by at most twice
// that. `magnitudes[i]` is element i's sum|terms|.
inline void expect_within_summation_bound(const Array& actual, const Array& expected,
                                          const std::vector<double>& magnitudes, int64_t n) {
  ASSERT_EQ(actual.shape(), expected.shape());
  const double u = std::ldexp(1.0, -24);
  const double gamma = static_cast<double>(n) * u / (1 - static_cast<double>(n) * u);
  const std::vector<double> a = actual.to_doubles();
  const std::vector<double> b = expected.to_doubles();
  ASSERT_EQ(a.size(), magnitudes.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 2 * gamma * magnitudes[i]) << "element " << i;
  }
}

// Per column of a [rows, cols] array: the sum of the magnitudes of its entries.
inline std::vector<double> column_magnitudes(const Array& x) {
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  const std::vector<double> v = x.to_doubles();
  std::vector<double> out(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c)] += std::abs(v[r * cols + c]);
  }
  return out;
}

// Per element of x [m, k] @ w [k, n]: sum over k of |x_ik w_kj|.
inline std::vector<double> product_magnitudes(const Array& x, const Array& w) {
  const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[1];
  const std::vector<double> a = x.to_doubles(), b = w.to_doubles();
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t l = 0; l < k; ++l) {
        out[static_cast<size_t>(i * n + j)] += std::abs(a[i * k + l] * b[l * n + j]);
      }
    }
  }
  return out;
}

// The message of the EngineError fn raises, or "(no error)".
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const EngineError& error) {
    return error.what();
  }
  return "(no error)";
}

// Runs fn expecting an EngineError whose message contains every one of `fragments`.
template <typename Fn>
void expect_error_mentions(Fn fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an EngineError";
  } catch (const EngineError& error) {
    for (const auto& fragment : fragments)
      EXPECT_THAT(error.what(), ::testing::HasSubstr(fragment));
  }
}

}  // namespace pmap_engine::testing
