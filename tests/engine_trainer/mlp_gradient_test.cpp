// The MLP's gradient from value_and_grad against its closed form, and mixed precision.
//
// Closed form for loss = mean_b CE(softmax(z2_b), y_b) with h = tanh(x W1 + b1), z2 = h W2 + b2
// (B samples, D inputs, H hidden, K classes; p = softmax(z2), Y = one_hot(y)):
//   dL/dz2 = (p - Y) / B                  [B, K]
//   dL/dW2 = h^T dL/dz2                   [H, K]     dL/db2 = sum_b dL/dz2   [K]
//   dL/dh  = dL/dz2 W2^T                  [B, H]
//   dL/dz1 = dL/dh * (1 - h^2)            [B, H]
//   dL/dW1 = x^T dL/dz1                   [D, H]     dL/db1 = sum_b dL/dz1   [H]
#include <gtest/gtest.h>

#include <cmath>

#include "models/model.h"
#include "pmap_engine/ops.h"

namespace parity::engine_trainer {
namespace {

using Matrix = std::vector<double>;  // row-major

Matrix random_matrix(size_t rows, size_t cols, uint32_t seed) {
  Matrix m(rows * cols);
  uint32_t state = seed;
  for (auto& value : m) {
    state = state * 1664525u + 1013904223u;  // a fixed LCG: reproducible inputs
    value = (static_cast<double>(state >> 8) / (1 << 24) - 0.5) * 0.8;
  }
  return m;
}

TEST(MlpGradient, MatchesTheClosedFormDerivation) {
  const size_t B = 5, D = 7, H = 6, K = 4;
  ModelSpec model;
  model.widths = {static_cast<int64_t>(D), static_cast<int64_t>(H), static_cast<int64_t>(K)};
  Matrix x = random_matrix(B, D, 1), w1 = random_matrix(D, H, 2), b1 = random_matrix(1, H, 3),
         w2 = random_matrix(H, K, 4), b2 = random_matrix(1, K, 5);
  std::vector<int32_t> y = {0, 3, 1, 1, 2};

  // Host computation of the closed form.
  Matrix h(B * H), dz2(B * K), dw2(H * K, 0), db2(K, 0), dz1(B * H), dw1(D * H, 0), db1(H, 0);
  for (size_t b = 0; b < B; ++b) {
    for (size_t j = 0; j < H; ++j) {
      double z = b1[j];
      for (size_t d = 0; d < D; ++d) z += x[b * D + d] * w1[d * H + j];
      h[b * H + j] = std::tanh(z);
    }
    std::vector<double> z2(K);
    double max_z = -1e300;
    for (size_t k = 0; k < K; ++k) {
      z2[k] = b2[k];
      for (size_t j = 0; j < H; ++j) z2[k] += h[b * H + j] * w2[j * K + k];
      max_z = std::max(max_z, z2[k]);
    }
    double total = 0;
    for (size_t k = 0; k < K; ++k) total += std::exp(z2[k] - max_z);
    for (size_t k = 0; k < K; ++k) {
      const double p = std::exp(z2[k] - max_z) / total;
      dz2[b * K + k] = (p - (static_cast<int32_t>(k) == y[b] ? 1.0 : 0.0)) / B;
    }
  }
  for (size_t b = 0; b < B; ++b) {
    for (size_t k = 0; k < K; ++k) {
      db2[k] += dz2[b * K + k];
      for (size_t j = 0; j < H; ++j) dw2[j * K + k] += h[b * H + j] * dz2[b * K + k];
    }
    for (size_t j = 0; j < H; ++j) {
      double dh = 0;
      for (size_t k = 0; k < K; ++k) dh += dz2[b * K + k] * w2[j * K + k];
      dz1[b * H + j] = dh * (1 - h[b * H + j] * h[b * H + j]);
      db1[j] += dz1[b * H + j];
      for (size_t d = 0; d < D; ++d) dw1[d * H + j] += x[b * D + d] * dz1[b * H + j];
    }
  }

  pe::Tree params =
      pe::Tree::dict({{"dense0", pe::Tree::dict({{"kernel", pe::Array::from_doubles({7, 6}, w1)},
                                                 {"bias", pe::Array::from_doubles({6}, b1)}})},
                      {"dense1", pe::Tree::dict({{"kernel", pe::Array::from_doubles({6, 4}, w2)},
                                                 {"bias", pe::Array::from_doubles({4}, b2)}})}});
  pe::TreeFunction loss = [&](const std::vector<pe::Tree>& args) {
    return pe::Tree(mlp_loss(model, args[0], args[1].leaf(), args[2].leaf(), pe::DType::f64));
  };
  pe::Tree grads =
      pe::grad(loss)({params, pe::Array::from_doubles({5, 7}, x), pe::Array::from_ints({5}, y)});
  auto expect_close = [](const pe::Tree& got, const Matrix& expected, const char* name) {
    std::vector<double> values = got.leaf().to_doubles();
    ASSERT_EQ(values.size(), expected.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_NEAR(values[i], expected[i], 1e-12) << name << "[" << i << "]";
    }
  };
  expect_close(grads["dense0"]["kernel"], dw1, "dW1");
  expect_close(grads["dense0"]["bias"], db1, "db1");
  expect_close(grads["dense1"]["kernel"], dw2, "dW2");
  expect_close(grads["dense1"]["bias"], db2, "db2");
}

TEST(MixedPrecision, Bf16AndF16ComputeKeepsF32MasterWeightsAndLoss) {
  for (const char* dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    CaseSpec spec;
    spec.model.widths = {8, 16, 3};
    spec.train.optimizer = "adam";
    spec.train.lr = 1e-2;
    spec.train.dtype = dtype;
    pe::Tree params = pe::Tree::dict(
        {{"dense0",
          pe::Tree::dict({{"kernel", pe::full({8, 16}, 0.05)}, {"bias", pe::zeros({16})}})},
         {"dense1",
          pe::Tree::dict({{"kernel", pe::full({16, 3}, -0.05)}, {"bias", pe::zeros({3})}})}});
    pe::Tree state = make_optimizer(spec.train).init(params);
    pe::Array x = pe::astype(pe::iota(pe::DType::f32, {4, 8}, 1), pe::DType::f32) * 0.1;
    pe::Array y = pe::Array::from_ints({4}, {0, 1, 2, 1});
    pe::Jitted step = make_train_step(spec);
    std::string program = step.program_text({params, state, x, y});
    EXPECT_NE(program.find(std::string("new_dtype=") + dtype), std::string::npos);
    pe::Tree out = step({params, state, x, y});
    // Master weights and optimizer state stay f32; the loss is cast back to f32.
    for (const auto& leaf : out[0].leaves()) EXPECT_EQ(leaf.dtype(), pe::DType::f32);
    EXPECT_EQ(out[2].leaf().dtype(), pe::DType::f32);
    EXPECT_TRUE(std::isfinite(out[2].leaf().item()));
  }
}

}  // namespace
}  // namespace parity::engine_trainer
