// ddp_ref: the PyTorch DDP reference trainer. Runs a case with LibTorch and the real c10d
// Reducer (the engine inside torch.nn.parallel.DistributedDataParallel) over a Gloo process
// group, and writes a run directory (common/include/parity/common/run_dir.h).
//
// This header is free of LibTorch on purpose: LibTorch's headers are slow to compile and stay
// inside ddp_ref/src.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "parity/common/case_spec.h"

namespace parity::ddp_ref {

// A deliberate fault, for tests of failure handling and for users who want to see how a
// failure is reported: rank `rank` fails at step `step` by throwing, by exiting the process
// abruptly, or by feeding NaN into its loss.
struct FaultInjection {
  enum class Kind { kThrow, kExit, kNan };
  int64_t rank = 0;
  int64_t step = 0;
  Kind kind = Kind::kThrow;
};
// Parses "RANK:STEP:KIND" (KIND: throw | exit | nan); InputError on anything else.
FaultInjection parse_fault_injection(const std::string& text);

struct DdpOptions {
  std::filesystem::path init_file;  // initial parameters (safetensors, canonical names)
  std::filesystem::path out_dir;    // run directory to write (rank 0 writes it)
  bool overwrite = false;           // replace an existing run directory
  double timeout_seconds = 60;      // every collective and rendezvous wait
  bool quiet = false;               // no progress lines on stderr
  std::optional<FaultInjection> fault;
  // Called by rank 0 after each step with the number of steps done (parity run's progress).
  std::function<void(int64_t steps_done)> on_step;
};

struct DdpSummary {
  std::filesystem::path run_dir;
  int64_t steps = 0;
  double final_loss = 0;
  std::optional<double> test_accuracy;  // classification cases
  std::optional<double> test_loss;
  double steady_step_median_seconds = 0;
  double samples_per_second = 0;
  int64_t peak_bytes_max_rank = 0;
  std::string memory_method;
};

// All ranks as threads of this process, over a HashStore. Throws RunError when a rank fails
// (naming it); the run directory is then marked incomplete.
DdpSummary run_threads(const CaseSpec& spec, const DdpOptions& options);

// Where this process sits in a multi-process run, read from torchrun's environment: RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. A process hosts `ranks_per_process`
// consecutive ranks as threads, starting at RANK (1 under torchrun; `parity ddp --nproc N`
// sets PARITY_RANKS_PER_PROCESS = replicas / N).
struct ProcessPlacement {
  int64_t first_rank = 0;
  int64_t ranks_per_process = 1;
  int64_t world_size = 1;
  std::string master_addr;
  int port = 0;
};
// nullopt when RANK is not set; InputError naming the variable when one is malformed.
std::optional<ProcessPlacement> placement_from_environment();

// This process's ranks, joining the others over a TCPStore. The process hosting rank 0 writes
// the run directory. Returns the summary on the process hosting rank 0.
DdpSummary run_process(const CaseSpec& spec, const DdpOptions& options,
                       const ProcessPlacement& placement);

// `parity ddp --nproc N`: starts N copies of `executable` with `arguments` and torchrun's
// variables on 127.0.0.1, waits for all (bounded by the timeout once one fails), and throws
// RunError naming the first rank that failed and how.
void launch_processes(const CaseSpec& spec, const DdpOptions& options, int64_t num_processes,
                      const std::filesystem::path& executable,
                      const std::vector<std::string>& arguments);

}  // namespace parity::ddp_ref
