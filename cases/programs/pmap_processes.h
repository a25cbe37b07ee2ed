// The engine trainer over several processes (S9, seed 002 §3.1-3.2): `parity pmap --nproc P`
// starts P copies of itself; each joins the others through pmap_engine/distributed.h (as every
// process of a JAX job calls jax.distributed.initialize), trains its replicas / P local
// devices on its own shard of every global batch, and process 0 writes the run directory.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"

namespace parity::cases {

struct PmapProcess {
  int64_t index = 0;
  int64_t count = 1;
  std::string coordinator;  // host:port of process 0's rendezvous
};

// This process's place in a multi-process run, from PARITY_PMAP_COORDINATOR,
// PARITY_PMAP_PROCESS_ID and PARITY_PMAP_NUM_PROCESSES (the launcher sets them); nullopt when
// they are unset. Throws InputError for a partial or malformed set.
std::optional<PmapProcess> pmap_process_from_environment();

// Starts `num_processes` copies of `executable arguments...` on this host (a free loopback
// port for the coordinator), which write the run directory `run_dir`, and waits for all
// (run_child_processes); RunError naming each process that failed.
void launch_pmap_processes(int64_t num_processes, const std::filesystem::path& executable,
                           const std::vector<std::string>& arguments, double timeout_seconds,
                           const std::filesystem::path& run_dir);

// Every process's values, concatenated in process order; the values themselves in a single
// process. A collective call: every process must make it.
std::vector<double> gather_across_processes(const std::vector<double>& local);
std::vector<uint64_t> gather_across_processes(const std::vector<uint64_t>& local);

}  // namespace parity::cases
