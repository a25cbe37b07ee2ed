// torch.utils.data.distributed.DistributedSampler (PyTorch 1.13) and the DataLoader batching on
// top of it, ported so that both engines read the same sample ids without LibTorch.
//
// Vocabulary (the words the code below uses):
//   epoch seed    seed + epoch. Python's __iter__ seeds a fresh torch.Generator with it, so an
//                 epoch's order depends only on (seed, epoch), never on earlier epochs.
//   permutation   torch.randperm(n, generator=g) of the n dataset indices when shuffling, the
//                 identity list(range(n)) otherwise. Called the epoch order below.
//   total size    num_samples * num_replicas: the epoch order is padded up to it (no drop_last)
//                 or truncated down to it (drop_last), so every rank gets num_samples ids.
//   padding       Python appends indices[:padding_size], or the whole list repeated as often as
//                 needed when padding_size > n. Either way, position p of the padded list holds
//                 epoch order[p mod n]; truncation (p < total size <= n) is the same formula.
//   rank stride   rank r takes positions r, r + R, r + 2R, ... (Python's
//                 indices[rank:total_size:num_replicas]), R = num_replicas.
// Worked example: n = 10, R = 4 -> num_samples = ceil(10/4) = 3, total size 12, the padded list
// is order[0..9] + order[0..1], and rank 1 reads positions 1, 5, 9.
//
// torch.randperm on CPU (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu, v1.13): fill
// r[i] = i, then for i in [0, n - 1): z = generator->random() % (n - i); swap(r[i], r[i + z]).
// random() is one 32-bit draw of at::mt19937 (CPUGeneratorImpl.cpp). Later PyTorch (2.x) uses a
// random64() "inside-out" shuffle for n >= UINT32_MAX / 20; 1.13.1 does not (checked against
// Debian's libtorch 1.13.1 with n = 214748365: the 32-bit form matched every element).
#include "parity/common/distributed_sampler.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include "parity/common/error.h"

namespace parity {
namespace {

// at::mt19937 (ATen/core/MT19937RNGEngine.h) is the reference MT19937 of Matsumoto & Nishimura:
// init_with_uint32(seed) sets state[0] = seed & 0xffffffff and state[j] = 1812433253 *
// (state[j-1] ^ (state[j-1] >> 30)) + j, and each call tempers the next word after a full twist.
// std::mt19937 is specified by [rand.eng.mt] with exactly that initialisation and output, so it
// is bit-identical once seeded with the low 32 bits. Note what that implies: the upper 32 bits
// of a torch seed are ignored (seed 2^32 + 42 permutes like seed 42; the golden vectors show it).
std::mt19937 torch_cpu_engine(uint64_t seed) {
  return std::mt19937(static_cast<uint32_t>(seed & 0xffffffffu));
}

void check_options(const DistributedSamplerOptions& options) {
  if (options.dataset_size < 0) {
    throw InputError("DistributedSampler: dataset_size must be >= 0, got " +
                     std::to_string(options.dataset_size));
  }
  if (options.num_replicas < 1) {
    throw InputError("DistributedSampler: num_replicas must be >= 1, got " +
                     std::to_string(options.num_replicas));
  }
}

// Python: ceil(n / R), or with drop_last and n % R != 0, ceil((n - R) / R), which equals
// floor(n / R) for those n (and 0 when n < R).
int64_t samples_per_rank(const DistributedSamplerOptions& options) {
  const int64_t n = options.dataset_size;
  const int64_t num_replicas = options.num_replicas;
  if (options.drop_last && n % num_replicas != 0) return n / num_replicas;
  return (n + num_replicas - 1) / num_replicas;
}

// The epoch order: the permutation for seed + epoch, or the identity without shuffle.
std::vector<int64_t> epoch_order(const DistributedSamplerOptions& options, int64_t epoch) {
  if (options.shuffle) {
    const uint64_t epoch_seed = options.seed + static_cast<uint64_t>(epoch);  // wraps like torch
    return torch_cpu_randperm(options.dataset_size, epoch_seed);
  }
  std::vector<int64_t> identity(static_cast<size_t>(options.dataset_size));
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int64_t>(i);
  return identity;
}

// One rank's slice of the padded (or truncated) epoch order, by rank stride.
std::vector<int64_t> rank_slice(const std::vector<int64_t>& order, int64_t num_replicas,
                                int64_t rank, int64_t num_samples) {
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<int64_t> slice;
  slice.reserve(static_cast<size_t>(num_samples));
  for (int64_t k = 0; k < num_samples; ++k) {
    const int64_t padded_position = rank + k * num_replicas;
    slice.push_back(order[static_cast<size_t>(padded_position % n)]);
  }
  return slice;
}

void check_rank(int64_t rank, int64_t num_replicas) {
  if (rank < 0 || rank >= num_replicas) {
    std::ostringstream message;
    message << "DistributedSampler: invalid rank " << rank
            << ", rank should be in the interval [0, " << num_replicas - 1 << "]";
    throw InputError(message.str());
  }
}

}  // namespace

std::vector<int64_t> torch_cpu_randperm(int64_t n, uint64_t seed) {
  if (n < 0)
    throw InputError("torch_cpu_randperm: n must be non-negative, got " + std::to_string(n));
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::mt19937 engine = torch_cpu_engine(seed);
  // Fisher-Yates from the front, exactly as randperm_cpu: position i swaps with position i + z,
  // z drawn from [0, n - i) as a 32-bit draw modulo n - i (torch's modulo bias included).
  for (int64_t i = 0; i < n - 1; ++i) {
    const int64_t z = static_cast<int64_t>(engine()) % (n - i);
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(z + i)]);
  }
  return perm;
}

DistributedSampler::DistributedSampler(DistributedSamplerOptions options)
    : options_(std::move(options)) {
  check_options(options_);
}

void DistributedSampler::set_epoch(int64_t epoch) { epoch_ = epoch; }

int64_t DistributedSampler::num_samples() const { return samples_per_rank(options_); }

int64_t DistributedSampler::total_size() const { return num_samples() * options_.num_replicas; }

std::vector<int64_t> DistributedSampler::indices(int64_t rank) const {
  check_rank(rank, options_.num_replicas);
  return rank_slice(epoch_order(options_, epoch_), options_.num_replicas, rank, num_samples());
}

DistributedBatchPlan::DistributedBatchPlan(DistributedSamplerOptions options,
                                           int64_t per_replica_batch)
    : options_(std::move(options)), per_replica_batch_(per_replica_batch) {
  check_options(options_);
  if (per_replica_batch_ < 1) {
    throw InputError("DistributedBatchPlan: per-replica batch size must be >= 1, got " +
                     std::to_string(per_replica_batch_));
  }
}

// DataLoader's BatchSampler: ceil(num_samples / B) batches, the last one shorter, or
// floor(num_samples / B) with drop_last (the case uses one drop_last flag for both).
int64_t DistributedBatchPlan::batches_per_epoch() const {
  const int64_t num_samples = samples_per_rank(options_);
  if (options_.drop_last) return num_samples / per_replica_batch_;
  return (num_samples + per_replica_batch_ - 1) / per_replica_batch_;
}

StepBatches DistributedBatchPlan::step(int64_t step_index) const {
  if (step_index < 0) {
    throw InputError("DistributedBatchPlan: step must be >= 0, got " + std::to_string(step_index));
  }
  const int64_t num_batches = batches_per_epoch();
  if (num_batches == 0) {
    std::ostringstream message;
    message << "DistributedBatchPlan: an epoch has no batch: each of the " << options_.num_replicas
            << " replicas gets " << samples_per_rank(options_) << " samples of a dataset of "
            << options_.dataset_size << ", fewer than the batch of " << per_replica_batch_
            << (options_.drop_last ? " with drop_last" : "")
            << "; lower the batch size or the replica count";
    throw InputError(message.str());
  }
  StepBatches batches;
  batches.epoch = step_index / num_batches;
  batches.batch_in_epoch = step_index % num_batches;

  // All ranks share one epoch order; each rank's DataLoader chunks its own slice.
  const std::vector<int64_t> order = epoch_order(options_, batches.epoch);
  const int64_t num_samples = samples_per_rank(options_);
  const int64_t first = batches.batch_in_epoch * per_replica_batch_;
  const int64_t last = std::min(first + per_replica_batch_, num_samples);
  for (int64_t rank = 0; rank < options_.num_replicas; ++rank) {
    const std::vector<int64_t> slice = rank_slice(order, options_.num_replicas, rank, num_samples);
    batches.rank_sample_ids.emplace_back(slice.begin() + first, slice.begin() + last);
  }
  return batches;
}

DistributedSamplerOptions case_sampler_options(const CaseSpec& spec, int64_t dataset_size,
                                               int64_t num_replicas) {
  DistributedSamplerOptions options;
  options.dataset_size = dataset_size;
  options.num_replicas = num_replicas;
  options.shuffle = spec.data.shuffle;
  options.seed = spec.data.seed;
  options.drop_last = spec.data.drop_last;
  return options;
}

}  // namespace parity
