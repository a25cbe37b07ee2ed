#include "process_group.h"

#include <limits>

namespace parity::ddp_ref {

c10::intrusive_ptr<c10d::ProcessGroupGloo> make_gloo_group(
    const c10::intrusive_ptr<c10d::Store>& store, int64_t rank, int64_t world_size,
    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(rank),
                                                     static_cast<int>(world_size), options);
}

DistributedDataParallel::DistributedDataParallel(
    std::vector<torch::Tensor> params, std::vector<torch::Tensor> buffers,
    c10::intrusive_ptr<c10d::ProcessGroup> process_group)
    : process_group_(process_group), buffers_(std::move(buffers)) {
  c10d::verify_params_across_processes(process_group, params, c10::nullopt);
  {
    // _sync_module_states: the parameters, then the buffers, in one coalesced broadcast.
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> module_states = params;
    module_states.insert(module_states.end(), buffers_.begin(), buffers_.end());
    c10d::broadcast_coalesced(process_group, module_states, kBroadcastBucketBytes, /*rank=*/0);
  }

  // find_unused_parameters=False: one bucket (size limit "infinite") for the first iteration.
  const std::vector<size_t> first_iteration_limits = {
      static_cast<size_t>(std::numeric_limits<int64_t>::max())};
  const std::vector<bool> expect_sparse_gradients(params.size(), false);
  auto [bucket_indices, per_bucket_limits] = c10d::compute_bucket_assignment_by_size(
      params, first_iteration_limits, expect_sparse_gradients);
  // DDP reverses the bucket order: gradients become ready roughly in reverse parameter order.
  std::reverse(bucket_indices.begin(), bucket_indices.end());
  std::reverse(per_bucket_limits.begin(), per_bucket_limits.end());

  reducer_ = std::make_shared<c10d::Reducer>(
      std::move(params), std::move(bucket_indices), std::move(per_bucket_limits),
      std::move(process_group), expect_sparse_gradients, kBucketBytesCap,
      /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
      std::unordered_map<size_t, std::string>{}, c10d::kDefaultFirstBucketBytes);
  logger_ = std::make_shared<c10d::Logger>(reducer_);
  reducer_->set_logger(logger_);
}

DistributedDataParallel::~DistributedDataParallel() {
  // DDP drops its Logger before the Reducer (logger.hpp: "Logger is deleted before Reducer").
  logger_.reset();
  reducer_.reset();
}

void DistributedDataParallel::before_forward(bool sync) {
  if (sync) reducer_->prepare_for_forward();
  // DDP calls this on every forward with grad enabled; it rebuilds once, after iteration one.
  reducer_->rebuild_buckets();
  // DDP.forward: `if self._check_sync_bufs_pre_fwd(): self._sync_buffers()`, which (without a
  // buffer comm hook or join) is will_sync_module_buffers(): require_forward_param_sync and
  // broadcast_buffers and the module has buffers; then a coalesced broadcast from rank 0
  // (_default_broadcast_coalesced). require_forward_param_sync is the previous forward's sync:
  // under gradient accumulation the first micro-batch of a step (after a synchronised one)
  // broadcasts and the others, the synchronised last one included, do not.
  if (!require_forward_param_sync_ || buffers_.empty()) return;
  torch::NoGradGuard no_grad;
  c10d::broadcast_coalesced(process_group_, buffers_, kBroadcastBucketBytes, /*rank=*/0);
}

void DistributedDataParallel::after_forward(bool sync) {
  // DDP.forward: require_forward_param_sync = (grad enabled and require_backward_grad_sync).
  require_forward_param_sync_ = sync;
  if (!sync) return;
  reducer_->prepare_for_backward({});
}

}  // namespace parity::ddp_ref
