// The synthetic-linear dataset: shape, determinism, the teacher relation y = 0.5 * x[:, perm] +
// 0.1 * noise, the test split, and load_case_dataset's dispatch.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/error.h"

namespace parity {
namespace {

// For each target column j, the input column whose 0.5 * x best explains y[:, j] (smallest
// residual sum of squares): the teacher's perm[j], recovered from the data alone.
std::vector<int64_t> recover_teacher(const Dataset& data) {
  const auto n = static_cast<size_t>(data.num_samples);
  const auto d = static_cast<size_t>(data.feature_dim);
  const auto k = static_cast<size_t>(data.target_dim);
  std::vector<int64_t> teacher(k);
  for (size_t j = 0; j < k; ++j) {
    double best_rss = INFINITY;
    for (size_t c = 0; c < d; ++c) {
      double rss = 0;
      for (size_t row = 0; row < n; ++row) {
        const double residual = data.targets[row * k + j] - 0.5 * data.features[row * d + c];
        rss += residual * residual;
      }
      if (rss < best_rss) {
        best_rss = rss;
        teacher[j] = static_cast<int64_t>(c);
      }
    }
  }
  return teacher;
}

struct Moments {
  double mean = 0;
  double std = 0;
};

Moments moments(const std::vector<double>& values) {
  Moments m;
  for (double v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (double v : values) m.std += (v - m.mean) * (v - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(values.size()));
  return m;
}

std::vector<double> residuals(const Dataset& data, const std::vector<int64_t>& teacher) {
  const auto d = static_cast<size_t>(data.feature_dim);
  const auto k = static_cast<size_t>(data.target_dim);
  std::vector<double> values;
  for (size_t row = 0; row < static_cast<size_t>(data.num_samples); ++row) {
    for (size_t j = 0; j < k; ++j) {
      values.push_back(data.targets[row * k + j] -
                       0.5 * data.features[row * d + static_cast<size_t>(teacher[j])]);
    }
  }
  return values;
}

TEST(SyntheticLinear, ShapeAndName) {
  const Dataset data = make_synthetic_linear(100, 12, 5, 7);
  EXPECT_EQ(data.name, "synthetic-linear(seed=7,n=100)");
  EXPECT_EQ(data.num_samples, 100);
  EXPECT_EQ(data.feature_dim, 12);
  EXPECT_EQ(data.target_dim, 5);
  EXPECT_EQ(data.features.size(), 100u * 12u);
  EXPECT_EQ(data.targets.size(), 100u * 5u);
  EXPECT_TRUE(data.labels.empty());
  EXPECT_EQ(data.num_classes, 0);
}

TEST(SyntheticLinear, SameSeedSameBits) {
  const Dataset a = make_synthetic_linear(64, 16, 16, 3);
  const Dataset b = make_synthetic_linear(64, 16, 16, 3);
  EXPECT_EQ(a.features, b.features);  // bitwise: std::vector<float> compares element by element
  EXPECT_EQ(a.targets, b.targets);
}

TEST(SyntheticLinear, DifferentSeedsDiffer) {
  const Dataset a = make_synthetic_linear(64, 16, 16, 0);
  const Dataset b = make_synthetic_linear(64, 16, 16, 1);
  EXPECT_NE(a.features, b.features);
  EXPECT_NE(a.targets, b.targets);
}

TEST(SyntheticLinear, TargetsFollowTheTeacher) {
  const Dataset data = make_synthetic_linear(4096, 24, 10, 0);
  const std::vector<int64_t> teacher = recover_teacher(data);
  // perm is part of a permutation: distinct input features.
  EXPECT_EQ(std::set<int64_t>(teacher.begin(), teacher.end()).size(), teacher.size());

  // Inputs are standard normal; residuals are the 0.1 * noise term. With 4096 * 24 inputs and
  // 4096 * 10 residuals the sample moments lie well within these bounds (several sigma).
  const Moments inputs = moments(std::vector<double>(data.features.begin(), data.features.end()));
  EXPECT_NEAR(inputs.mean, 0.0, 0.02);
  EXPECT_NEAR(inputs.std, 1.0, 0.02);
  const Moments noise = moments(residuals(data, teacher));
  EXPECT_NEAR(noise.mean, 0.0, 0.003);
  EXPECT_NEAR(noise.std, 0.1, 0.003);
}

TEST(SyntheticLinear, TeacherIsAPermutationWhenSquare) {
  const Dataset data = make_synthetic_linear(512, 16, 16, 5);
  const std::vector<int64_t> teacher = recover_teacher(data);
  EXPECT_EQ(std::set<int64_t>(teacher.begin(), teacher.end()).size(), 16u);
  // Seed 5 and a 16-feature shuffle: the identity would mean perm was never applied.
  std::vector<int64_t> identity(16);
  for (int64_t i = 0; i < 16; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_NE(teacher, identity);
}

TEST(SyntheticLinear, RefusesMoreOutputsThanInputs) {
  try {
    make_synthetic_linear(10, 4, 8, 0);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "synthetic-linear: the targets are a permutation of input features, so "
                 "output_dim (8) must not exceed input_dim (4)");
  }
  EXPECT_THROW(make_synthetic_linear(0, 4, 4, 0), InputError);
}

CaseSpec small_synthetic_case() {
  CaseSpec spec;
  spec.name = "small";
  spec.model.widths = {20, 6};
  spec.model.loss = "mse";
  spec.data.dataset = "synthetic-linear";
  spec.data.synthetic_num_samples = 2048;
  spec.data.synthetic_seed = 11;
  return spec;
}

TEST(SyntheticLinear, CaseDatasetTrainIsMakeSyntheticLinear) {
  const CaseSpec spec = small_synthetic_case();
  const Dataset train = load_case_dataset(spec, "train");
  const Dataset direct = make_synthetic_linear(2048, 20, 6, 11);
  EXPECT_EQ(train.name, direct.name);
  EXPECT_EQ(train.features, direct.features);
  EXPECT_EQ(train.targets, direct.targets);
}

// data.feature_offset adds one float32 constant to every feature of both splits, and nothing
// else changes.
TEST(SyntheticLinear, FeatureOffsetShiftsEveryFeatureOfBothSplits) {
  CaseSpec spec = small_synthetic_case();
  spec.data.feature_offset = 16;
  for (const char* split : {"train", "test"}) {
    const Dataset plain = load_case_dataset(small_synthetic_case(), split);
    const Dataset shifted = load_case_dataset(spec, split);
    ASSERT_EQ(shifted.features.size(), plain.features.size()) << split;
    for (size_t i = 0; i < plain.features.size(); ++i) {
      ASSERT_EQ(shifted.features[i], plain.features[i] + 16.0f) << split << " " << i;
    }
    EXPECT_EQ(shifted.targets, plain.targets) << split;
  }
}

TEST(SyntheticLinear, TestSplitHasFreshInputsAndTheSameTeacher) {
  const CaseSpec spec = small_synthetic_case();
  const Dataset train = load_case_dataset(spec, "train");
  const Dataset test = load_case_dataset(spec, "test");
  EXPECT_EQ(test.name, "synthetic-linear(seed=11,n=2048)/test");
  EXPECT_EQ(test.num_samples, 2048);
  EXPECT_NE(test.features, train.features);
  const std::vector<int64_t> teacher = recover_teacher(train);
  EXPECT_EQ(recover_teacher(test), teacher);
  EXPECT_NEAR(moments(residuals(test, teacher)).std, 0.1, 0.005);
}

TEST(SyntheticLinear, Linear1024CaseDataset) {
  const Dataset data = load_case_dataset(load_case("linear1024-mse"), "train");
  EXPECT_EQ(data.num_samples, 8192);
  EXPECT_EQ(data.feature_dim, 1024);
  EXPECT_EQ(data.target_dim, 1024);
  EXPECT_EQ(data.features.size(), 8192u * 1024u);
}

TEST(SyntheticLinear, CaseDatasetDispatchesOnDataset) {
  const Dataset fmnist = load_case_dataset(load_case("mlp2-fmnist"), "test");
  EXPECT_EQ(fmnist.name, "fashion-mnist/test");
  EXPECT_EQ(fmnist.num_samples, 10000);
  try {
    load_case_dataset(small_synthetic_case(), "valid");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "dataset split 'valid' of case 'small': expected 'train' or 'test'");
  }
}

}  // namespace
}  // namespace parity
