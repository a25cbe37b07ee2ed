// Real run directories for the compare tests, made with the real `parity` binary on a small
// variant of mlp2-fmnist (10 steps, tensors at steps 0, 3 and 9), and helpers that copy a run and
// change one thing in its files.
//
// gtest_discover_tests runs every test in its own process, so a per-suite setup would train the
// same runs once per test. Runs are therefore made once per build of the binary and shared: they
// live under the build folder in a directory named after the binary's size and modification time
// (a rebuilt binary gets fresh runs), and each is trained into a private temporary directory and
// renamed into place, so processes racing to make the same run never see half of one.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "command.h"
#include "parity/common/tensor_file.h"

namespace parity::testing {

// The case every shared run trains, before the run's own options.
inline const std::string kSmallCase =
    "mlp2-fmnist --set train.steps=10 --set 'train.record_steps=[0, 3, 9]'";

inline std::filesystem::path shared_runs_root() {
  namespace fs = std::filesystem;
  const fs::path binary = PARITY_EXECUTABLE;
  const std::string stamp = fmt::format("{}-{}", fs::file_size(binary),
                                        fs::last_write_time(binary).time_since_epoch().count());
  const fs::path all_runs = fs::path(PARITY_BINARY_DIR) / "tests" / "compare-runs";
  const fs::path root = all_runs / stamp;
  if (!fs::exists(root) && fs::exists(all_runs)) {
    // Runs of an older binary are never used again.
    std::error_code ignored;
    for (const auto& old : fs::directory_iterator(all_runs)) fs::remove_all(old.path(), ignored);
  }
  return root;
}

// The run `name`, made once with `parity SUBCOMMAND CASE OPTIONS --out DIR`, CASE being
// kSmallCase unless given; the command must exit with `expected_exit_code` (1 for a run that
// fails on purpose).
inline std::filesystem::path shared_run(const std::string& name, const std::string& subcommand,
                                        const std::string& options = "",
                                        int expected_exit_code = 0,
                                        const std::string& case_text = kSmallCase) {
  namespace fs = std::filesystem;
  const fs::path root = shared_runs_root();
  const fs::path run = root / name;
  if (fs::exists(run / "run.json")) return run;
  const fs::path scratch = root / fmt::format(".{}-{}", name, getpid());
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const CommandResult result =
      run_command(fmt::format("{} {} {} {} --quiet --out {}", PARITY_EXECUTABLE, subcommand,
                              case_text, options, shell_quote((scratch / "run").string())));
  EXPECT_EQ(result.exit_code, expected_exit_code) << result.output;
  std::error_code ignored;
  fs::rename(scratch / "run", run, ignored);  // fails harmlessly if another process won
  fs::remove_all(scratch, ignored);
  return run;
}

inline std::filesystem::path ddp_run() { return shared_run("ddp", "ddp"); }
inline std::filesystem::path pmap_run() { return shared_run("pmap", "pmap"); }
inline std::filesystem::path psum_run() {
  return shared_run("pmap-psum", "pmap", "--program psum");
}
// The same case from other initial parameters (init.seed 1).
inline std::filesystem::path other_init_run() {
  return shared_run("pmap-init-seed1", "pmap", "--set init.seed=1");
}
// Adam's eps inside the sqrt (optax's eps_root) where torch adds it outside.
inline std::filesystem::path eps_inside_sqrt_run() {
  return shared_run("pmap-eps-inside-sqrt", "pmap", "--set train.eps=0 --set train.eps_root=1e-8");
}
// The same case trained by the engine in float64: the oracle.
inline std::filesystem::path float64_run() { return shared_run("pmap-f64", "pmap", "--float64"); }

// A copy of `run` at `to`, to change.
inline std::filesystem::path copy_run(const std::filesystem::path& run,
                                      const std::filesystem::path& to) {
  std::filesystem::copy(run, to, std::filesystem::copy_options::recursive);
  return to;
}

// Rewrites the metrics.jsonl line of `step` with `edit`.
inline void edit_metrics(const std::filesystem::path& run, int64_t step,
                         const std::function<void(nlohmann::json&)>& edit) {
  const std::filesystem::path path = run / "metrics.jsonl";
  std::ifstream in(path);
  std::ostringstream text;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json metrics = nlohmann::json::parse(line);
    if (metrics.at("step") == step) edit(metrics);
    text << metrics.dump() << '\n';
  }
  in.close();
  std::ofstream(path, std::ios::trunc) << text.str();
}

// Rewrites run.json with `edit`.
inline void edit_run_json(const std::filesystem::path& run,
                          const std::function<void(nlohmann::json&)>& edit) {
  const std::filesystem::path path = run / "run.json";
  nlohmann::json info = nlohmann::json::parse(std::ifstream(path));
  edit(info);
  std::ofstream(path, std::ios::trunc) << info.dump(2) << '\n';
}

// Rewrites tensors/step_NNNNNN.safetensors with `edit`, keeping its metadata.
inline void edit_tensors(const std::filesystem::path& run, int64_t step,
                         const std::function<void(NamedTensors&)>& edit) {
  const std::filesystem::path path = run / "tensors" / fmt::format("step_{:06d}.safetensors", step);
  SafetensorsFile file = read_safetensors(path);
  edit(file.tensors);
  write_safetensors(path, file.tensors, file.metadata);
}

}  // namespace parity::testing
