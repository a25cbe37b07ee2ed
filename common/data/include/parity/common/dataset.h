// Datasets both engines train on: real Fashion-MNIST from Debian's dataset-fashion-mnist, and a
// seeded synthetic regression set for the documents' Linear-1024 MSE case.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"

namespace parity {

struct Dataset {
  std::string name;            // "fashion-mnist/train", "synthetic-linear(seed=0,n=8192)"
  int64_t num_samples = 0;
  int64_t feature_dim = 0;     // 784 for Fashion-MNIST
  std::vector<float> features; // [num_samples, feature_dim], row-major
  // Classification: labels [num_samples] in [0, num_classes). Regression: targets
  // [num_samples, target_dim]. Exactly one of the two is non-empty.
  int64_t num_classes = 0;
  std::vector<int64_t> labels;
  int64_t target_dim = 0;
  std::vector<float> targets;
};

// $PARITY_DATA_DIR if set, else /usr/share/datasets/fashion-mnist.
std::filesystem::path fashion_mnist_dir();

// Reads the IDX .gz files of one split ("train": 60000 samples, "test": 10000). Images become
// float32 in [0, 1] (pixel / 255), flattened to 784; labels int64. Checks magic numbers, counts
// and sizes; a missing file names the Debian package to install.
Dataset load_fashion_mnist(const std::string& split);
// The same from the IDX .gz files in `dir` (load_fashion_mnist uses fashion_mnist_dir()); tests
// point it at small hand-made files.
Dataset load_fashion_mnist_from(const std::filesystem::path& dir, const std::string& split);

// features x ~ normal, targets y = x[:, perm] * 0.5 + 0.1 * noise, all from the threefry key
// of `seed` (documented in docs/case-schema.md): a linear map a single dense layer can learn.
Dataset make_synthetic_linear(int64_t num_samples, int64_t input_dim, int64_t output_dim,
                              uint64_t seed);

// The dataset a case trains on ("train") or evaluates on ("test"). The synthetic test split is
// drawn from the same teacher with fresh inputs (documented in docs/case-schema.md).
Dataset load_case_dataset(const CaseSpec& spec, const std::string& split);

}  // namespace parity
