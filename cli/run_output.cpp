#include "run_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "case_init.h"
#include "output_options.h"
#include "parity/common/error.h"
#include "parity/common/run_dir.h"

namespace parity::cli {

void add_run_options(CLI::App* command, RunArguments& arguments, const std::string& producer) {
  command->add_option("case", arguments.case_name, "case name or path to a .toml file")->required();
  command->add_option("--set", arguments.overrides,
                      "override a case key, e.g. --set train.steps=50 (repeatable)");
  command->add_option("--init", arguments.init,
                      "initial parameters (safetensors); default: made with `parity init` "
                      "into the run directory");
  command
      ->add_option("--out", arguments.out,
                   "run directory to write; default: runs/CASE/" + producer + "-TIMESTAMP")
      ->check(output_name());
  command->add_flag("--overwrite", arguments.overwrite, "replace an existing run directory");
  command->add_flag("--quiet", arguments.quiet, "no progress lines on stderr");
  command->add_flag("--verbose", arguments.verbose,
                    "with several processes: show the workers' output (the libraries' warnings) "
                    "as well as keeping it in RUN_DIR/worker.log");
}

std::filesystem::path default_out_dir(const CaseSpec& spec, const std::string& producer) {
  std::string stamp = utc_timestamp_now();
  stamp.erase(std::remove(stamp.begin(), stamp.end(), ':'), stamp.end());
  return std::filesystem::path("runs") / spec.name / (producer + "-" + stamp);
}

void create_output_directory(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (!error && std::filesystem::is_directory(dir, error)) return;
  throw InputError(fmt::format(
      "cannot create the output directory {}: {}; choose a directory you can write to",
      dir.string(), error ? error.message() : "a file is in the way"));
}

std::filesystem::path ensure_init_file(const CaseSpec& spec, const std::string& init,
                                       const std::filesystem::path& out_dir) {
  if (!init.empty()) return init;
  create_output_directory(out_dir);
  std::filesystem::path path = out_dir / "init.safetensors";
  write_init_file(path, spec);
  return path;
}

namespace {
std::string format_bytes(double num_bytes) {
  if (num_bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", num_bytes / (1 << 30));
  if (num_bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", num_bytes / (1 << 20));
  return fmt::format("{:.1f} KiB", num_bytes / 1024);
}

}  // namespace

void print_summary(const std::string& command, const std::filesystem::path& run_dir,
                   const std::string& placement) {
  RunDir run = read_run_dir(run_dir);
  const RunInfo& info = run.info;
  auto result = [&](const char* key) {
    auto found = info.results.find(key);
    return found == info.results.end() ? std::string("n/a") : fmt::format("{:.4f}", found->second);
  };
  const auto& peaks = info.memory.peak_bytes_per_replica;
  const double peak = peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
  const double median = info.timings.steady_step_median_seconds;
  std::cout << fmt::format("{}: case {}, {} replicas ({}), {} steps, {}\n", command, info.case_name,
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
  const auto& params = info.memory.param_bytes_per_replica;
  if (!params.empty()) {
    const auto& optimizer = info.memory.optimizer_state_bytes_per_replica;
    std::cout << fmt::format("  params + opt    {} + {} per replica ({})\n",
                             format_bytes(static_cast<double>(params.front())),
                             format_bytes(static_cast<double>(optimizer.front())),
                             info.memory.state_layout);
  }
  std::cout << fmt::format("  run directory   {}\n", run_dir.string());
}

}  // namespace parity::cli
