// ddp_ref: the PyTorch DDP reference trainer. Runs a case with LibTorch and the real c10d
// Reducer (the engine inside torch.nn.parallel.DistributedDataParallel) over a Gloo process
// group, and writes a run directory (common/run_dir/include/parity/common/run_dir.h).
//
// This header is free of LibTorch on purpose: LibTorch's headers are slow to compile and stay
// inside ddp_ref/src.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"
#include "parity/common/producer.h"

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

// Its inverse: "RANK:STEP:KIND", for a launcher passing the fault on to its processes.
std::string format_fault_injection(const FaultInjection& fault);

struct DdpOptions : ProducerOptions {
  std::optional<FaultInjection> fault;
};

// InputError when the case or the options cannot run here (a fault naming a rank or step the
// run lacks, an optimizer setting torch.optim lacks, a dtype this LibTorch cannot multiply),
// before any rank starts. train() checks it too; a launcher calls it before starting processes.
void check_options(const CaseSpec& spec, const DdpOptions& options);

// init.scheme = "torch": the case's initial parameters as LibTorch's own module constructors
// draw them after torch::manual_seed(init.seed) (Linear and Conv2d weights kaiming_uniform with
// a = sqrt(5), their biases uniform(+-1/sqrt(fan_in)), norm scales one and biases zero), under
// canonical names in Flax's layout, F32. Reseeds the process's default CPU generator: call it
// before training, not beside it. InputError for a layers model ddp_ref cannot train (a layer
// kind it does not build, sync BatchNorm, a dtype other than f32).
NamedTensors torch_init_params(const CaseSpec& spec);

// Trains the case on parallel.replicas ranks: all of them as threads of this process over a
// HashStore (`place` nullopt), or this process's replicas / place->count consecutive ranks,
// joining the others over a TCPStore served by process 0 (torchrun's model). The process
// hosting rank 0 writes the run directory and returns the summary; the others return an empty
// one. Throws RunError when a rank fails, naming the rank that caused it; the run directory is
// then marked incomplete.
ProducerSummary train(const CaseSpec& spec, const DdpOptions& options,
                      const std::optional<ProcessPlace>& place = std::nullopt);

}  // namespace parity::ddp_ref
