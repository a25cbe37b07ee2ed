// What the tests of the Python logging helpers (interop/python) share: which Python runs them,
// whether it has a module, and how a helper's log directory is read with parity's own run
// directory reader.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/run_dir.h"

namespace parity::testing {

// Debian's interpreter, where python3-torch and python3-numpy live (scripts/install-deps.sh); the
// `python3` first on a developer's PATH may be another one without them. PARITY_PYTHON overrides.
inline std::string python_executable() {
  const char* from_env = std::getenv("PARITY_PYTHON");
  return from_env != nullptr && *from_env != '\0' ? from_env : "/usr/bin/python3";
}

inline std::filesystem::path python_helpers_dir() {
  return std::filesystem::path(PARITY_SOURCE_DIR) / "interop" / "python";
}

// True when the interpreter imports `module`. scripts/install-deps.sh installs what the tests
// import, so a missing module fails them (saying how to install it) rather than skipping them.
inline bool python_has_module(const std::string& module) {
  return run_command(shell_quote(python_executable()) + " -c " + shell_quote("import " + module),
                     60)
             .exit_code == 0;
}

// The helper's metrics.jsonl under a run.json made for `spec`, read back by read_run_dir: the
// reader checks every key and type of every line, so this proves the lines are StepMetrics.
inline RunDir read_log_as_run_dir(const std::filesystem::path& log_dir, const CaseSpec& spec,
                                  const std::filesystem::path& run_dir,
                                  const std::string& producer) {
  {
    RunDirWriter writer(run_dir, run_info_for_case(spec, producer));
    writer.finish();
  }
  std::filesystem::copy_file(log_dir / "metrics.jsonl", run_dir / "metrics.jsonl",
                             std::filesystem::copy_options::overwrite_existing);
  return read_run_dir(run_dir);
}

}  // namespace parity::testing
