#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "commands.h"
#include "parity/common/case_spec.h"
#include "parity/common/error.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"

namespace parity::cli {
namespace {

struct DdpArguments {
  std::string case_name;
  std::vector<std::string> overrides;
  std::string init;
  std::string out;
  int64_t nproc = 0;  // 0: the case's parallel.processes
  double timeout_seconds = 60;
  bool overwrite = false;
  bool quiet = false;
  std::string inject_fault;
};

std::filesystem::path default_out_dir(const CaseSpec& spec) {
  std::string stamp = utc_timestamp_now();
  stamp.erase(std::remove(stamp.begin(), stamp.end(), ':'), stamp.end());
  return std::filesystem::path("runs") / spec.name / ("ddp-" + stamp);
}

// Without --init, the run directory gets the case's own initial parameters (parity init).
std::filesystem::path ensure_init_file(const CaseSpec& spec, const DdpArguments& arguments,
                                       const std::filesystem::path& out_dir) {
  if (!arguments.init.empty()) return arguments.init;
  std::filesystem::create_directories(out_dir);
  std::filesystem::path path = out_dir / "init.safetensors";
  write_safetensors(path, init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale),
                    {{"case", spec.name}, {"scheme", spec.init.scheme}});
  return path;
}

std::string format_bytes(double num_bytes) {
  if (num_bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", num_bytes / (1 << 30));
  if (num_bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", num_bytes / (1 << 20));
  return fmt::format("{:.1f} KiB", num_bytes / 1024);
}

void print_summary(const std::filesystem::path& run_dir, const std::string& placement) {
  RunDir run = read_run_dir(run_dir);
  const RunInfo& info = run.info;
  auto result = [&](const char* key) {
    auto found = info.results.find(key);
    return found == info.results.end() ? std::string("n/a") : fmt::format("{:.4f}", found->second);
  };
  const auto& peaks = info.memory.peak_bytes_per_replica;
  const double peak = peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
  const double median = info.timings.steady_step_median_seconds;
  std::cout << fmt::format("parity ddp: case {}, {} replicas ({}), {} steps, {}\n", info.case_name,
                           info.replicas, placement, run.steps.size(), info.status);
  std::cout << fmt::format("  final loss      {}\n", result("final_loss"));
  std::cout << fmt::format("  test loss       {}\n", result("test_loss"));
  if (info.results.count("test_accuracy")) {
    std::cout << fmt::format("  test accuracy   {}\n", result("test_accuracy"));
  }
  std::cout << fmt::format(
      "  step time       {:.2f} ms median, IQR {:.2f} ms (first step {:.1f} ms, setup {:.2f} s)\n",
      median * 1e3, info.timings.steady_step_spread_seconds * 1e3,
      info.timings.first_step_seconds * 1e3, info.timings.setup_seconds);
  std::cout << fmt::format("  peak memory     {} on the largest rank ({})\n", format_bytes(peak),
                           info.memory.method);
  std::cout << fmt::format("  run directory   {}\n", run_dir.string());
}

std::vector<std::string> child_arguments(const DdpArguments& arguments,
                                         const std::filesystem::path& init,
                                         const std::filesystem::path& out) {
  std::vector<std::string> args = {
      "ddp",    arguments.case_name, "--init",    init.string(),
      "--out",  out.string(),        "--timeout", fmt::format("{}", arguments.timeout_seconds),
      "--quiet"};
  for (const auto& override_text : arguments.overrides) {
    args.push_back("--set");
    args.push_back(override_text);
  }
  if (arguments.overwrite) args.push_back("--overwrite");
  if (!arguments.inject_fault.empty()) {
    args.push_back("--inject-fault");
    args.push_back(arguments.inject_fault);
  }
  return args;
}

void run_ddp(const DdpArguments& arguments) {
  CaseSpec spec = load_case(arguments.case_name, arguments.overrides);
  ddp_ref::DdpOptions options;
  options.timeout_seconds = arguments.timeout_seconds;
  options.overwrite = arguments.overwrite;
  options.quiet = arguments.quiet;
  if (!arguments.inject_fault.empty()) {
    options.fault = ddp_ref::parse_fault_injection(arguments.inject_fault);
  }
  if (arguments.timeout_seconds <= 0) {
    throw InputError("--timeout must be a positive number of seconds");
  }

  // A process started by torchrun (or by `--nproc` below) joins as its rank(s).
  if (auto placement = ddp_ref::placement_from_environment()) {
    if (arguments.out.empty() || arguments.init.empty()) {
      throw InputError(
          "a process joining a multi-process run (RANK is set) needs --init FILE and --out DIR, "
          "the same on every rank");
    }
    options.init_file = arguments.init;
    options.out_dir = arguments.out;
    ddp_ref::run_process(spec, options, *placement);
    return;
  }

  options.out_dir =
      arguments.out.empty() ? default_out_dir(spec) : std::filesystem::path(arguments.out);
  options.init_file = ensure_init_file(spec, arguments, options.out_dir);
  const int64_t processes = arguments.nproc > 0 ? arguments.nproc : spec.parallel.processes;
  if (processes > 1) {
    ddp_ref::launch_processes(spec, options, processes, "/proc/self/exe",
                              child_arguments(arguments, options.init_file, options.out_dir));
    print_summary(options.out_dir, fmt::format("{} processes", processes));
    return;
  }
  ddp_ref::run_threads(spec, options);
  print_summary(options.out_dir, "threads");
}

}  // namespace

void register_ddp_command(CLI::App& app) {
  auto arguments = std::make_shared<DdpArguments>();
  CLI::App* command = app.add_subcommand(
      "ddp", "Train a case with LibTorch DDP (c10d Reducer over Gloo) and write a run directory");
  command->add_option("case", arguments->case_name, "case name or path to a .toml file")
      ->required();
  command->add_option("--set", arguments->overrides,
                      "override a case key, e.g. --set train.steps=50 (repeatable)");
  command->add_option("--init", arguments->init,
                      "initial parameters (safetensors); default: made with `parity init` "
                      "into the run directory");
  command->add_option("--out", arguments->out,
                      "run directory to write; default: runs/CASE/ddp-TIMESTAMP");
  command
      ->add_option("--nproc", arguments->nproc,
                   "processes to spread the replicas over (default: the case's "
                   "parallel.processes); 1 runs every rank as a thread")
      ->check(CLI::PositiveNumber);
  command->add_option("--timeout", arguments->timeout_seconds,
                      "seconds any rank waits for the others before failing (default 60)");
  command->add_flag("--overwrite", arguments->overwrite, "replace an existing run directory");
  command->add_flag("--quiet", arguments->quiet, "no progress lines on stderr");
  command->add_option("--inject-fault", arguments->inject_fault,
                      "make RANK fail at STEP, to see how failures are reported: "
                      "RANK:STEP:throw|exit|nan");
  command->callback([arguments] { run_ddp(*arguments); });
}

}  // namespace parity::cli
