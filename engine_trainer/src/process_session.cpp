#include "process_session.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <map>

#include "parity/common/error.h"
#include "parity/common/peer_processes.h"
#include "pmap_engine/dtype.h"

namespace parity::engine_trainer {
namespace {

namespace dist = pmap_engine::distributed;

template <typename T>
std::vector<T> gather(const std::vector<T>& local) {
  if (!dist::is_initialized()) return local;
  std::vector<char> bytes(local.size() * sizeof(T));
  std::memcpy(bytes.data(), local.data(), bytes.size());
  std::vector<T> all;
  for (const std::vector<char>& theirs : dist::process_allgather(bytes)) {
    const size_t before = all.size();
    all.resize(before + theirs.size() / sizeof(T));
    std::memcpy(all.data() + before, theirs.data(), theirs.size());
  }
  return all;
}

}  // namespace

ProcessSession::ProcessSession(const CaseSpec& spec, const EngineProgram& program,
                               const std::optional<ProcessPlace>& place, double timeout_seconds)
    : place_(place) {
  if (!place_) return;
  const int64_t count = place_->count;
  if (count != spec.parallel.processes) {
    throw InputError(fmt::format(
        "case {}: this engine process is one of {} but the case says parallel.processes = {}; "
        "start the run with parity pmap --nproc {}",
        spec.name, count, spec.parallel.processes, spec.parallel.processes));
  }
  if (program.needs_one_process()) {
    throw InputError(fmt::format(
        "case {}: engine program {} runs in one process only; set parallel.processes = 1",
        spec.name, program.name));
  }
  dist::InitializeOptions options;
  options.coordinator_address =
      fmt::format("{}:{}", place_->coordinator_host, place_->coordinator_port);
  options.num_processes = static_cast<int>(count);
  options.process_id = static_cast<int>(place_->index);
  options.local_device_count = static_cast<int>(spec.parallel.replicas / count);
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  try {
    dist::initialize(options);
  } catch (const pmap_engine::EngineError& error) {
    throw RunError(fmt::format("engine process {} of {}: {}", place_->index, count, error.what()));
  }
}

ProcessSession::~ProcessSession() {
  if (place_) dist::shutdown();
}

std::vector<double> gather_across_processes(const std::vector<double>& local) {
  return gather(local);
}

std::vector<uint64_t> gather_across_processes(const std::vector<uint64_t>& local) {
  return gather(local);
}

std::string describe_collective_failure(const dist::CollectiveFailed& error) {
  std::map<int64_t, ProcessAddress> processes;
  const auto& addresses = error.process_addresses();
  for (size_t p = 0; p < addresses.size(); ++p) {
    if (const auto address = parse_process_address(addresses[p])) {
      processes[static_cast<int64_t>(p)] = *address;
    }
  }
  const std::string lost = describe_lost_ranks(processes, "process");
  if (lost.empty()) return error.what();
  return fmt::format(
      "lost engine {}; it died or was stopped, so the cross-process collectives cannot complete",
      lost);
}

}  // namespace parity::engine_trainer
