// The synthetic-linear regression set and the dispatch from a case to its dataset.
//
// Definition (docs/case-schema.md, "The synthetic-linear dataset"), in JAX terms, with
// N = num_samples, D = input_dim, K = output_dim <= D:
//   key   = jax.random.PRNGKey(seed)
//   x     = jax.random.normal(fold_in(key, 0), (N, D))                       # float32
//   perm  = jax.random.permutation(fold_in(key, 1), D)[:K]                   # the "teacher"
//   noise = jax.random.normal(fold_in(key, 2), (N, K))
//   y     = x[:, perm] * 0.5 + 0.1 * noise                                   # float32
// The test split keeps the teacher (perm) and draws fresh inputs and noise:
//   x     = normal(fold_in(key, 3), (N, D)),  noise = normal(fold_in(key, 4), (N, K)).
// A single dense layer can fit y exactly up to the noise: the optimum is W[perm[j], j] = 0.5,
// every other weight and the bias 0, leaving a residual of standard deviation 0.1.
//
// Every draw uses jax_threefry_partitionable = true, JAX's default since 0.5.0, fixed here
// rather than read from a default so that a case's data never changes under it.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "parity/common/dataset.h"
#include "parity/common/error.h"
#include "pmap_engine/random.h"

namespace parity {

namespace {

namespace jr = pmap_engine::random;

constexpr bool kPartitionable = true;

// The fold_in tags of the definition above.
enum StreamTag : uint32_t {
  kTrainInputs = 0,
  kTeacher = 1,
  kTrainNoise = 2,
  kTestInputs = 3,
  kTestNoise = 4,
};

// jax.random.permutation(key, n) for an integer n (jax/_src/random.py, _shuffle): instead of
// Fisher-Yates, `num_rounds` stable sorts of arange(n) by fresh 32-bit random keys, where
//   num_rounds = ceil(3 * ln(max(1, n)) / ln(2^32 - 1))
// (1 round up to n = 1625, 2 beyond) and each round does
//   key, subkey = split(key); order = stable argsort(random_bits(subkey, (n,))); x = x[order].
std::vector<int64_t> permutation(jr::Key key, int64_t n) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), int64_t{0});
  const double uint32_max = 4294967295.0;
  const auto num_rounds = static_cast<int>(
      std::ceil(3.0 * std::log(static_cast<double>(std::max<int64_t>(1, n))) /
                std::log(uint32_max)));
  for (int round = 0; round < num_rounds; ++round) {
    const std::vector<jr::Key> keys = jr::split(key, 2, kPartitionable);
    key = keys[0];
    const std::vector<uint32_t> sort_keys = jr::random_bits(keys[1], {n}, kPartitionable);
    std::vector<size_t> order(values.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sort_keys[a] < sort_keys[b]; });
    std::vector<int64_t> shuffled(values.size());
    for (size_t i = 0; i < order.size(); ++i) shuffled[i] = values[order[i]];
    values = std::move(shuffled);
  }
  return values;
}

void check_dims(int64_t num_samples, int64_t input_dim, int64_t output_dim) {
  if (num_samples < 1 || input_dim < 1 || output_dim < 1) {
    throw InputError("synthetic-linear: expected num_samples, input_dim and output_dim >= 1, "
                     "found " + std::to_string(num_samples) + ", " + std::to_string(input_dim) +
                     ", " + std::to_string(output_dim));
  }
  if (output_dim > input_dim) {
    throw InputError("synthetic-linear: the targets are a permutation of input features, so "
                     "output_dim (" + std::to_string(output_dim) +
                     ") must not exceed input_dim (" + std::to_string(input_dim) + ")");
  }
}

// x: [N, D] inputs; y: [N, K] targets of the teacher `perm` (K entries) plus noise.
Dataset make_split(int64_t num_samples, int64_t input_dim, int64_t output_dim, uint64_t seed,
                   StreamTag inputs_tag, StreamTag noise_tag) {
  check_dims(num_samples, input_dim, output_dim);
  const jr::Key key = jr::prng_key(static_cast<int64_t>(seed));
  const std::vector<int64_t> perm_all = permutation(jr::fold_in(key, kTeacher), input_dim);
  const std::vector<int64_t> perm(perm_all.begin(), perm_all.begin() + output_dim);

  Dataset dataset;
  dataset.name = "synthetic-linear(seed=" + std::to_string(seed) +
                 ",n=" + std::to_string(num_samples) + ")";
  dataset.num_samples = num_samples;
  dataset.feature_dim = input_dim;
  dataset.features =
      jr::normal(jr::fold_in(key, inputs_tag), {num_samples, input_dim}, kPartitionable);
  const std::vector<float> noise =
      jr::normal(jr::fold_in(key, noise_tag), {num_samples, output_dim}, kPartitionable);

  dataset.target_dim = output_dim;
  dataset.targets.resize(static_cast<size_t>(num_samples * output_dim));
  const auto d = static_cast<size_t>(input_dim);
  const auto k = static_cast<size_t>(output_dim);
  for (size_t row = 0; row < static_cast<size_t>(num_samples); ++row) {
    for (size_t j = 0; j < k; ++j) {
      // float32 throughout, as JAX evaluates x * 0.5 + 0.1 * noise with weak-typed scalars.
      const float signal = dataset.features[row * d + static_cast<size_t>(perm[j])] * 0.5f;
      const float scaled_noise = 0.1f * noise[row * k + j];
      dataset.targets[row * k + j] = signal + scaled_noise;
    }
  }
  return dataset;
}

}  // namespace

Dataset make_synthetic_linear(int64_t num_samples, int64_t input_dim, int64_t output_dim,
                              uint64_t seed) {
  return make_split(num_samples, input_dim, output_dim, seed, kTrainInputs, kTrainNoise);
}

namespace {

// The dataset as generated or read, before data.feature_offset.
Dataset read_case_dataset(const CaseSpec& spec, const std::string& split) {
  if (spec.data.dataset == "fashion-mnist") return load_fashion_mnist(split);
  if (spec.data.dataset == "synthetic-linear") {
    if (spec.model.widths.size() < 2) {
      throw InputError("case '" + spec.name + "': model.widths needs input and output widths");
    }
    const int64_t input_dim = spec.model.widths.front();
    const int64_t output_dim = spec.model.widths.back();
    if (split == "train") {
      return make_synthetic_linear(spec.data.synthetic_num_samples, input_dim, output_dim,
                                   spec.data.synthetic_seed);
    }
    Dataset test = make_split(spec.data.synthetic_num_samples, input_dim, output_dim,
                              spec.data.synthetic_seed, kTestInputs, kTestNoise);
    test.name += "/test";
    return test;
  }
  throw InputError("case '" + spec.name + "': unknown data.dataset '" + spec.data.dataset +
                   "'; expected fashion-mnist or synthetic-linear");
}

}  // namespace

Dataset load_case_dataset(const CaseSpec& spec, const std::string& split) {
  if (split != "train" && split != "test") {
    throw InputError("dataset split '" + split + "' of case '" + spec.name +
                     "': expected 'train' or 'test'");
  }
  Dataset data = read_case_dataset(spec, split);
  const auto offset = static_cast<float>(spec.data.feature_offset);
  if (offset != 0) {
    for (float& feature : data.features) feature += offset;
  }
  return data;
}

}  // namespace parity
