#include "producer_processes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "parity/common/child_processes.h"
#include "parity/common/error.h"
#include "parity/common/loopback_port.h"

namespace parity::cli {
namespace {

constexpr const char* kCoordinator = "PARITY_PMAP_COORDINATOR";
constexpr const char* kProcessId = "PARITY_PMAP_PROCESS_ID";
constexpr const char* kNumProcesses = "PARITY_PMAP_NUM_PROCESSES";
constexpr const char* kLoopback = "127.0.0.1";

// A non-negative integer from the environment; `missing` explains an unset one.
int64_t environment_integer(const char* name, const std::string& missing) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') throw InputError(missing);
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 0) {
    throw InputError(fmt::format("environment: {}='{}' is not a non-negative integer", name, text));
  }
  return value;
}

// The case as this launcher resolved it, in a file its children read (a folder of its own, as
// the file must be named after the case); removed afterwards.
class CaseFile {
 public:
  explicit CaseFile(const CaseSpec& spec) {
    std::string pattern = (std::filesystem::temp_directory_path() / "parity-case-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw RunError(
          fmt::format("cannot create a folder for the worker processes' case file "
                      "({}): {}",
                      pattern, std::strerror(errno)));
    }
    folder_ = pattern;
    path_ = folder_ / (spec.name + ".toml");
    std::ofstream out(path_);
    out << spec.to_toml();
    if (!out.flush()) {
      throw RunError(
          fmt::format("cannot write the case for the worker processes to {}", path_.string()));
    }
  }
  ~CaseFile() {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }
  CaseFile(const CaseFile&) = delete;
  CaseFile& operator=(const CaseFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path folder_;
  std::filesystem::path path_;
};

// Starts `parity SUBCOMMAND CASE_FILE --init --out --timeout --quiet [--overwrite] FLAGS...`
// once per child and waits for all; RunError naming each process that failed. Once one fails,
// the others get the timeout plus 10 s to write their own report before they are killed.
void run_copies(const std::string& subcommand, const CaseSpec& spec, const ProducerOptions& options,
                const std::vector<std::string>& flags, const std::vector<ChildProcess>& children) {
  const CaseFile case_file(spec);
  std::vector<std::string> arguments = {subcommand,  case_file.path().string(),
                                        "--init",    options.init_file.string(),
                                        "--out",     options.out_dir.string(),
                                        "--timeout", fmt::format("{}", options.timeout_seconds),
                                        "--quiet"};
  if (options.overwrite) arguments.push_back("--overwrite");
  arguments.insert(arguments.end(), flags.begin(), flags.end());
  const std::vector<std::string> failures = run_child_processes(
      "/proc/self/exe", arguments, children,
      std::chrono::seconds(static_cast<int64_t>(std::ceil(options.timeout_seconds)) + 10),
      options.out_dir, options.verbose);
  if (!failures.empty()) {
    throw RunError(fmt::format("{} run over {} processes failed: {}",
                               subcommand == "ddp" ? "ddp" : "engine", children.size(),
                               fmt::join(failures, "; ")));
  }
}

void launch_engine_processes(const CaseSpec& spec, const engine_trainer::EngineOptions& options,
                             int64_t processes) {
  const std::string coordinator = fmt::format("{}:{}", kLoopback, free_loopback_port());
  std::vector<ChildProcess> children;
  for (int64_t index = 0; index < processes; ++index) {
    children.push_back({fmt::format("engine process {}", index),
                        {{kCoordinator, coordinator},
                         {kProcessId, std::to_string(index)},
                         {kNumProcesses, std::to_string(processes)}}});
  }
  std::vector<std::string> flags = {"--program", options.step.program};
  if (options.step.float64) flags.push_back("--float64");
  if (options.step.check_replicas) flags.push_back("--check-replicas");
  run_copies("pmap", spec, options, flags, children);
}

}  // namespace

std::optional<ProcessPlace> ddp_place_from_environment(const CaseSpec& spec) {
  if (std::getenv("RANK") == nullptr) return std::nullopt;
  const auto missing = [](const char* name) {
    return fmt::format(
        "environment: RANK is set but {} is not; a process joining a "
        "multi-process run needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
        "(as torchrun sets them)",
        name);
  };
  const auto required = [&](const char* name) { return environment_integer(name, missing(name)); };
  const int64_t rank = required("RANK");
  const int64_t world_size = required("WORLD_SIZE");
  const int64_t port = required("MASTER_PORT");
  const char* per_process_text = std::getenv("PARITY_RANKS_PER_PROCESS");
  const int64_t ranks_per_process = per_process_text == nullptr || *per_process_text == '\0'
                                        ? 1
                                        : environment_integer("PARITY_RANKS_PER_PROCESS", "");
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0') throw InputError(missing("MASTER_ADDR"));
  if (ranks_per_process < 1 || world_size < 1 || rank % ranks_per_process != 0 ||
      rank + ranks_per_process > world_size || world_size % ranks_per_process != 0 || port < 1 ||
      port > 65535) {
    throw InputError(fmt::format(
        "environment: RANK={} WORLD_SIZE={} PARITY_RANKS_PER_PROCESS={} MASTER_PORT={} do not "
        "describe a valid placement (RANK must be a multiple of the ranks per process and "
        "below WORLD_SIZE; the port in 1..65535)",
        rank, world_size, ranks_per_process, port));
  }
  if (world_size != spec.parallel.replicas) {
    throw InputError(fmt::format(
        "environment: WORLD_SIZE={} but case {} has parallel.replicas = {}; make them equal "
        "(--set parallel.replicas={})",
        world_size, spec.name, spec.parallel.replicas, world_size));
  }
  ProcessPlace place;
  place.index = rank / ranks_per_process;
  place.count = world_size / ranks_per_process;
  place.coordinator_host = addr;
  place.coordinator_port = static_cast<int>(port);
  return place;
}

std::optional<ProcessPlace> engine_place_from_environment() {
  const char* coordinator = std::getenv(kCoordinator);
  if (coordinator == nullptr || *coordinator == '\0') return std::nullopt;
  const auto required = [](const char* name) {
    return environment_integer(
        name, fmt::format("environment: {} is set, so this is a process of a multi-process "
                          "engine run, but {} is unset; the launcher (parity pmap --nproc) sets "
                          "{}, {} and {} together",
                          kCoordinator, name, kCoordinator, kProcessId, kNumProcesses));
  };
  const std::string address = coordinator;
  const size_t colon = address.rfind(':');
  char* end = nullptr;
  const long port =
      colon == std::string::npos ? -1 : std::strtol(address.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || *end != '\0' || port < 1 || port > 65535) {
    throw InputError(fmt::format("environment: {}='{}' is not HOST:PORT (port 1..65535)",
                                 kCoordinator, address));
  }
  ProcessPlace place;
  place.index = required(kProcessId);
  place.count = required(kNumProcesses);
  place.coordinator_host = address.substr(0, colon);
  place.coordinator_port = static_cast<int>(port);
  if (place.count < 1 || place.index >= place.count) {
    throw InputError(fmt::format("environment: {}={} is not below {}={}", kProcessId, place.index,
                                 kNumProcesses, place.count));
  }
  return place;
}

void launch_ddp_processes(const CaseSpec& spec, const ddp_ref::DdpOptions& options,
                          int64_t processes) {
  const int64_t replicas = spec.parallel.replicas;
  if (processes < 1 || replicas % processes != 0) {
    throw InputError(fmt::format(
        "--nproc {}: the case's {} replicas must split evenly over the processes; pick a "
        "divisor of {}",
        processes, replicas, replicas));
  }
  ddp_ref::check_options(spec, options);
  const int64_t per_process = replicas / processes;
  const std::string port = std::to_string(free_loopback_port());
  std::vector<ChildProcess> children;
  for (int64_t index = 0; index < processes; ++index) {
    const std::string rank = std::to_string(index * per_process);
    children.push_back({fmt::format("process {} (ranks {}..{})", index, index * per_process,
                                    (index + 1) * per_process - 1),
                        {{"RANK", rank},
                         {"LOCAL_RANK", rank},
                         {"WORLD_SIZE", std::to_string(replicas)},
                         {"MASTER_ADDR", kLoopback},
                         {"MASTER_PORT", port},
                         {"PARITY_RANKS_PER_PROCESS", std::to_string(per_process)}}});
  }
  std::vector<std::string> flags;
  if (options.fault) flags = {"--inject-fault", ddp_ref::format_fault_injection(*options.fault)};
  run_copies("ddp", spec, options, flags, children);
}

void train_engine(const CaseSpec& spec, const engine_trainer::EngineOptions& options,
                  int64_t processes) {
  if (processes <= 1) {
    engine_trainer::train(spec, options);
    return;
  }
  if (processes != spec.parallel.processes) {
    throw InputError(fmt::format(
        "--nproc {}: the case says parallel.processes = {}; use --set parallel.processes={} to "
        "change it",
        processes, spec.parallel.processes, processes));
  }
  launch_engine_processes(spec, options, processes);
}

}  // namespace parity::cli
