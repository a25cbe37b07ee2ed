#include "pmap_processes.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "parity/common/child_processes.h"
#include "parity/common/error.h"
#include "parity/common/loopback_port.h"
#include "pmap_engine/distributed.h"

namespace parity::cases {
namespace {

constexpr const char* kCoordinator = "PARITY_PMAP_COORDINATOR";
constexpr const char* kProcessId = "PARITY_PMAP_PROCESS_ID";
constexpr const char* kNumProcesses = "PARITY_PMAP_NUM_PROCESSES";

int64_t environment_integer(const char* name) {
  const char* text = std::getenv(name);
  char* end = nullptr;
  const long long value = text == nullptr ? -1 : std::strtoll(text, &end, 10);
  if (text == nullptr || *text == '\0' || *end != '\0' || value < 0) {
    throw InputError(fmt::format(
        "environment: {} is set, so this is a process of a multi-process engine run, but {} "
        "is {}; the launcher (parity pmap --nproc) sets {}, {} and {} together",
        kCoordinator, name, text == nullptr ? "unset" : fmt::format("'{}'", text), kCoordinator,
        kProcessId, kNumProcesses));
  }
  return value;
}

template <typename T>
std::vector<T> gather(const std::vector<T>& local) {
  namespace dist = pmap_engine::distributed;
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

std::optional<PmapProcess> pmap_process_from_environment() {
  const char* coordinator = std::getenv(kCoordinator);
  if (coordinator == nullptr || *coordinator == '\0') return std::nullopt;
  PmapProcess process;
  process.coordinator = coordinator;
  process.index = environment_integer(kProcessId);
  process.count = environment_integer(kNumProcesses);
  return process;
}

void launch_pmap_processes(int64_t num_processes, const std::filesystem::path& executable,
                           const std::vector<std::string>& arguments, double timeout_seconds,
                           const std::filesystem::path& run_dir) {
  const std::string coordinator = fmt::format("127.0.0.1:{}", free_loopback_port());
  std::vector<ChildProcess> children;
  for (int64_t index = 0; index < num_processes; ++index) {
    children.push_back({fmt::format("engine process {}", index),
                        {{kCoordinator, coordinator},
                         {kProcessId, std::to_string(index)},
                         {kNumProcesses, std::to_string(num_processes)}}});
  }
  const std::vector<std::string> failures = run_child_processes(
      executable, arguments, children,
      std::chrono::seconds(static_cast<int64_t>(std::ceil(timeout_seconds)) + 10), run_dir);
  if (!failures.empty()) {
    throw RunError(fmt::format("engine run over {} processes failed: {}", num_processes,
                               fmt::join(failures, "; ")));
  }
}

std::vector<double> gather_across_processes(const std::vector<double>& local) {
  return gather(local);
}

std::vector<uint64_t> gather_across_processes(const std::vector<uint64_t>& local) {
  return gather(local);
}

}  // namespace parity::cases
