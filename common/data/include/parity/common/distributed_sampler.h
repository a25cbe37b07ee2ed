// PyTorch's torch.utils.data.DistributedSampler, ported exactly, so that both engines read the
// same global sample ids per step without depending on LibTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "parity/common/case_spec.h"

namespace parity {

struct DistributedSamplerOptions {
  int64_t dataset_size = 0;
  int64_t num_replicas = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

// The case's data section (shuffle, seed, drop_last) over `num_replicas` replicas.
DistributedSamplerOptions case_sampler_options(const CaseSpec& spec, int64_t dataset_size,
                                               int64_t num_replicas);

class DistributedSampler {
 public:
  explicit DistributedSampler(DistributedSamplerOptions options);

  // As Python's sampler.set_epoch(epoch): the next indices() shuffle with seed + epoch.
  void set_epoch(int64_t epoch);

  // Samples each rank gets per epoch (Python's num_samples) and their total over ranks.
  int64_t num_samples() const;
  int64_t total_size() const;

  // The dataset indices rank `rank` iterates this epoch, in order (Python's __iter__).
  std::vector<int64_t> indices(int64_t rank) const;

 private:
  DistributedSamplerOptions options_;
  int64_t epoch_ = 0;
};

// torch.randperm(n, generator=g) with g = torch.Generator().manual_seed(seed) on CPU.
std::vector<int64_t> torch_cpu_randperm(int64_t n, uint64_t seed);

// One step's view of the data: for each rank, the dataset ids of its batch, as
// DataLoader(batch_size=B, sampler=DistributedSampler(...)) yields them.
struct StepBatches {
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  std::vector<std::vector<int64_t>> rank_sample_ids;  // [num_replicas][<= batch]
};

// Iterates steps across epochs: the batch of step s for every rank, calling set_epoch(e + 1)
// when an epoch ends (the DataLoader's last batch is shorter unless drop_last).
class DistributedBatchPlan {
 public:
  DistributedBatchPlan(DistributedSamplerOptions options, int64_t per_replica_batch);
  int64_t batches_per_epoch() const;
  StepBatches step(int64_t step_index) const;

 private:
  DistributedSamplerOptions options_;
  int64_t per_replica_batch_;
};

}  // namespace parity
