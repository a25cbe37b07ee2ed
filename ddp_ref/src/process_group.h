// Process groups and the part of torch.nn.parallel.DistributedDataParallel that surrounds the
// c10d::Reducer: what its constructor and forward() do, in the order PyTorch 1.13 does it
// (torch/nn/parallel/distributed.py: __init__, _ddp_init_helper, forward).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "torch_pch.h"

namespace parity::ddp_ref {

// One rank's Gloo process group over `store`, on the loopback interface. Every collective
// and rendezvous waits at most `timeout`.
c10::intrusive_ptr<c10d::ProcessGroupGloo> make_gloo_group(
    const c10::intrusive_ptr<c10d::Store>& store, int64_t rank, int64_t world_size,
    std::chrono::milliseconds timeout);

class DistributedDataParallel {
 public:
  // DDP's constructor: checks that every rank has the same parameter shapes
  // (verify_params_across_processes), broadcasts rank 0's parameters and then its buffers
  // (module.named_buffers(): BatchNorm's running statistics and num_batches_tracked) in 250 MiB
  // coalesced buckets (torch/distributed/utils.py, _sync_module_states), assigns gradient
  // buckets and builds the Reducer and its Logger. As in DDP with find_unused_parameters=False, the
  // first iteration uses one bucket; the Reducer rebuilds buckets in gradient-ready order with caps
  // 1 MiB (first) and bucket_cap_mb = 25 MiB after it.
  DistributedDataParallel(std::vector<torch::Tensor> params, std::vector<torch::Tensor> buffers,
                          c10::intrusive_ptr<c10d::ProcessGroup> process_group);
  ~DistributedDataParallel();

  // Around the module's forward of a training step (grad enabled), as DDP.forward: before
  // it, prepare_for_forward, the one-time bucket rebuild and, with broadcast_buffers=True
  // (DDP's default), rank 0's buffers broadcast to every rank (_sync_buffers); after it,
  // prepare_for_backward so that the backward pass all-reduces gradients. `sync = false` is
  // DDP's no_sync(): gradients accumulate locally.
  void before_forward(bool sync);
  void after_forward(bool sync);

  static constexpr size_t kBroadcastBucketBytes = 250u * 1024 * 1024;  // DDP's default
  static constexpr int64_t kBucketBytesCap = 25 * 1024 * 1024;         // bucket_cap_mb=25

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> process_group_;
  std::vector<torch::Tensor> buffers_;
  // DDP.require_forward_param_sync: whether the last forward (with grad) synchronised
  // gradients. It gates the next forward's buffer broadcast (will_sync_module_buffers).
  bool require_forward_param_sync_ = true;
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
};

}  // namespace parity::ddp_ref
