// The engine's side of a multi-process run: this process joins the others through
// pmap_engine/distributed.h (as every process of a JAX job calls jax.distributed.initialize),
// exchanges host values with them, and names the process that was lost when an exchange fails.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/common/producer.h"
#include "pmap_engine/distributed.h"

namespace parity::engine_trainer {

// The distributed session for as long as the run trains; nothing in a single-process run.
class ProcessSession {
 public:
  // InputError when the place does not fit the case (process count) or the program (one that
  // runs in one process only); RunError when the others cannot be joined within the timeout.
  ProcessSession(const CaseSpec& spec, const EngineProgram& program,
                 const std::optional<ProcessPlace>& place, double timeout_seconds);
  ~ProcessSession();
  ProcessSession(const ProcessSession&) = delete;
  ProcessSession& operator=(const ProcessSession&) = delete;

  int64_t index() const { return place_ ? place_->index : 0; }
  int64_t count() const { return place_ ? place_->count : 1; }
  bool writes() const { return index() == 0; }  // process 0 writes the run directory

 private:
  std::optional<ProcessPlace> place_;
};

// Every process's values, concatenated in process order; the values themselves in a single
// process. A collective call: every process must make it.
std::vector<double> gather_across_processes(const std::vector<double>& local);
std::vector<uint64_t> gather_across_processes(const std::vector<uint64_t>& local);

// Why a cross-process exchange failed, naming the processes the kernel says are gone or
// stopped ("lost engine process 1 (pid 4242, exited); ...").
std::string describe_collective_failure(const pmap_engine::distributed::CollectiveFailed& error);

}  // namespace parity::engine_trainer
