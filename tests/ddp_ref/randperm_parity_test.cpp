// parity's LibTorch-free port of torch.randperm and DistributedSampler against LibTorch itself:
// torch::randperm with a CPUGeneratorImpl seeded like Python's g.manual_seed(seed), and the
// sampler's padding and rank stride recomputed with tensor ops.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "parity/common/distributed_sampler.h"

namespace parity {
namespace {

std::vector<int64_t> to_vector(const torch::Tensor& tensor) {
  const torch::Tensor contiguous = tensor.contiguous();
  const int64_t* data = contiguous.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + contiguous.numel());
}

std::vector<int64_t> libtorch_randperm(int64_t n, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return to_vector(torch::randperm(n, generator, torch::TensorOptions().dtype(torch::kLong)));
}

// Python's DistributedSampler.__iter__ written with tensor ops: pad by repeating the order (or
// truncate with drop_last) to total_size, then take [rank:total_size:num_replicas].
std::vector<int64_t> libtorch_sampler_indices(const DistributedSamplerOptions& options,
                                              int64_t epoch, int64_t rank, int64_t total_size) {
  const int64_t n = options.dataset_size;
  torch::Tensor order;
  if (options.shuffle) {
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed + epoch);
    order = torch::randperm(n, generator, torch::TensorOptions().dtype(torch::kLong));
  } else {
    order = torch::arange(n, torch::TensorOptions().dtype(torch::kLong));
  }
  const int64_t repeats = (total_size + n - 1) / n;  // >= 1; enough copies to cover the padding
  const torch::Tensor padded = order.repeat({repeats}).slice(0, 0, total_size);
  return to_vector(padded.slice(0, rank, total_size, options.num_replicas));
}

TEST(RandpermParity, MatchesLibTorchRandperm) {
  for (int64_t n : {0, 1, 2, 7, 100, 60000}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, uint64_t{123456789},
                          (uint64_t{1} << 32) + 42, ~uint64_t{0}}) {
      EXPECT_EQ(torch_cpu_randperm(n, seed), libtorch_randperm(n, seed))
          << "n=" << n << " seed=" << seed;
    }
  }
}

TEST(RandpermParity, SamplerMatchesLibTorchComputation) {
  for (int64_t n : {1, 10, 11, 1000}) {
    for (int64_t num_replicas : {1, 2, 3, 4, 7, 8}) {
      for (bool shuffle : {true, false}) {
        for (bool drop_last : {false, true}) {
          const DistributedSamplerOptions options{n, num_replicas, shuffle, /*seed=*/17, drop_last};
          DistributedSampler sampler(options);
          for (int64_t epoch : {0, 3}) {
            sampler.set_epoch(epoch);
            for (int64_t rank = 0; rank < num_replicas; ++rank) {
              EXPECT_EQ(sampler.indices(rank),
                        libtorch_sampler_indices(options, epoch, rank, sampler.total_size()))
                  << "n=" << n << " R=" << num_replicas << " shuffle=" << shuffle
                  << " drop_last=" << drop_last << " epoch=" << epoch << " rank=" << rank;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace parity
