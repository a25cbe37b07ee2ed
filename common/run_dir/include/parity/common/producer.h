// What the two producers (ddp_ref, engine_trainer) share: each trains a case from an init file
// into a run directory, in one process or as one process of several, and says how it ended.
//   ddp_ref::train(spec, DdpOptions, place)          LibTorch DDP (c10d Reducer over Gloo)
//   engine_trainer::train(spec, EngineOptions, place) pmap_engine, the JAX model
// Where a process sits in a multi-process run (ProcessPlace) is decided by its launcher and read
// from the environment by the command line (cli/), never by a producer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace parity {

struct ProducerOptions {
  std::filesystem::path init_file;  // initial parameters (safetensors, canonical names)
  std::filesystem::path out_dir;    // the run directory (process 0 writes it)
  bool overwrite = false;           // replace an existing run directory
  bool quiet = false;               // no progress lines on stderr
  // A multi-process run: the workers' output (the libraries' warnings) on stderr as well as in
  // RUN_DIR/worker.log.
  bool verbose = false;
  // Every wait on another rank, device or process: rendezvous, collectives, exchanges.
  double timeout_seconds = 60;
  // Called by the writing process after each step with the number of steps done.
  std::function<void(int64_t steps_done)> on_step;
};

// One process of a run spread over `count` processes on this host or others: it hosts
// replicas / count consecutive replicas (ranks or devices), from index * replicas / count on.
// The process with index 0 serves the rendezvous at coordinator_host:coordinator_port.
struct ProcessPlace {
  int64_t index = 0;
  int64_t count = 1;
  std::string coordinator_host;
  int coordinator_port = 0;
};

// What the writing process knows at the end of a run; the run directory holds the rest.
struct ProducerSummary {
  std::filesystem::path run_dir;
  int64_t steps = 0;
  double final_loss = 0;
  std::optional<double> test_loss;
  std::optional<double> test_accuracy;  // classification cases
};

}  // namespace parity
