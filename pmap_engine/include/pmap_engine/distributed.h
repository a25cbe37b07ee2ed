// jax.distributed: one run over several processes, each with its own local devices.
//
//   distributed::initialize({"10.0.0.1:1234", /*num_processes=*/2, /*process_id=*/p, 4});
//
// is jax.distributed.initialize(coordinator_address, num_processes, process_id) on a host with
// 4 local devices: afterwards pmap maps over all 8 devices of both processes. As in JAX, each
// process passes pmap the part of every mapped argument that belongs to its local devices
// (leading axis = local_device_count()) and gets back its local devices' outputs; collectives
// over the mapped axis span every process's devices. Global device g lives in process
// g / local_device_count(), so device order, axis_index and the order in which psum folds
// devices are those of one process holding all of them: a 2x4 run computes a 1x8 run's bits.
//
// Transport: process 0 serves a small rendezvous store at the coordinator address; the
// processes then connect pairwise with Gloo over TCP, and each collective of a pmapped program
// all-gathers its operands across processes before the engine's own kernel runs on all of them.
// Every process must make the same sequence of pmap calls (SPMD), as in JAX.
//
// The state is per process, as JAX's is; initialize twice is refused, shutdown() ends it (and
// is called at exit).
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace pmap_engine::distributed {

struct InitializeOptions {
  std::string coordinator_address;  // "host:port": process 0 serves the rendezvous there
  int num_processes = 1;
  int process_id = 0;
  int local_device_count = 1;  // the same in every process
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// Connects this process to the others; blocks until all num_processes have joined or the
// timeout passes (EngineError naming the coordinator and what is missing).
void initialize(const InitializeOptions& options);
void shutdown();
bool is_initialized();

int process_index();       // jax.process_index(): 0 when not initialized
int process_count();       // jax.process_count(): 1 when not initialized
int local_device_count();  // of this process (0 when not initialized)
int device_count();        // all processes' devices (0 when not initialized)

// Every process's `local` bytes, in process order (jax.experimental.multihost_utils'
// process_allgather, on bytes). A collective call: every process must make it. Throws
// CollectiveFailed when another process is gone or does not answer within the timeout.
std::vector<std::vector<char>> process_allgather(const std::vector<char>& local);

// A cross-process collective that could not complete: another process died, was stopped or
// hung. Not a misuse (EngineError): the run failed. It carries where every process lives
// ("host pid", in process order, exchanged at initialize) so that the caller can ask the
// kernel which one is lost: after the failure the coordinator may be gone too.
class CollectiveFailed : public std::runtime_error {
 public:
  CollectiveFailed(const std::string& what, std::vector<std::string> process_addresses)
      : std::runtime_error(what), process_addresses_(std::move(process_addresses)) {}
  const std::vector<std::string>& process_addresses() const { return process_addresses_; }

 private:
  std::vector<std::string> process_addresses_;
};

}  // namespace pmap_engine::distributed
