// One rank's training loop: the DDP step as a PyTorch user writes it, with the run
// directory's metrics gathered on the way.
#pragma once

#include <map>
#include <mutex>
#include <optional>

#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/error.h"
#include "parity/common/peer_processes.h"
#include "parity/common/run_dir.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "torch_pch.h"

namespace parity::ddp_ref {

// The case's datasets, loaded once per process and read by every rank thread.
struct TrainingData {
  Dataset train;
  Dataset test;
  torch::Tensor train_features;  // [N, D] float32, a view of train.features
  torch::Tensor train_targets;   // [N] int64 labels, or [N, T] float32 targets
  torch::Tensor test_features;
  torch::Tensor test_targets;
};
TrainingData load_training_data(const CaseSpec& spec);

// Where every rank's process lives, gathered once all ranks have joined and kept in this
// process: after a failure the store may be gone with process 0, and this still names the rank
// whose process died or stopped (peer_processes.h). Shared by the rank threads of a process.
struct RankAddresses {
  std::mutex mutex;
  std::map<int64_t, ProcessAddress> by_rank;
};

struct RankContext {
  const CaseSpec* spec = nullptr;
  const DdpOptions* options = nullptr;
  const TrainingData* data = nullptr;
  int64_t rank = 0;
  int64_t world_size = 1;
  c10::intrusive_ptr<c10d::Store> store;
  // Where the ranks meet, for messages: the store's HOST:PORT, or empty for an in-process one.
  std::string rendezvous;
  RankAddresses* addresses = nullptr;
  // Rank 0 only: the initial parameters it broadcasts, and the run directory it writes.
  const NamedTensors* init_params = nullptr;
  RunDirWriter* writer = nullptr;
  std::chrono::steady_clock::time_point run_start;
};

// Trains one rank to the end. Returns the summary on rank 0, nullopt elsewhere. Throws
// RunError for a failure this rank detected (non-finite values, an injected fault) and
// PeerFailure when a collective failed because another rank is missing.
std::optional<ProducerSummary> train_rank(const RankContext& context);

// A collective or rendezvous that failed or timed out: the cause is usually another rank.
class PeerFailure : public RunError {
 public:
  using RunError::RunError;
};

// The store key through which each rank tells the others the step it is at: kJoinedStep once
// it has joined, then each step's index as the step starts. Read back to name the rank that
// others were waiting for.
std::string progress_key(int64_t rank);
// The store key of rank's ProcessAddress ("host pid").
std::string address_key(int64_t rank);
inline constexpr int64_t kJoinedStep = -1;
void report_progress_to_store(c10d::Store& store, int64_t rank, int64_t step);

}  // namespace parity::ddp_ref
