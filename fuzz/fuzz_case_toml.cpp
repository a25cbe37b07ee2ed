// load_case on a case file: TOML syntax (toml++), the schema (sections, keys, kinds), the
// cross-checks between keys, record steps; parts after the first (split at kPartSeparator) are
// `--set section.key=value` overrides, which the command line takes from the user too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "parity/common/case_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = parity::fuzz::split_parts(data, size, 9);
  // No case.name in the seeds: the name is optional, and a name that differs from the file's
  // stem stops loading before the cross-checks.
  const auto file = parity::fuzz::fresh_dir() / "fuzz.toml";
  parity::fuzz::write_file(file, parts[0]);
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  if (!overrides.empty()) {
    // Not read by load_case: a record of the overrides for PARITY_FUZZ_KEEP, one per line as
    // the regression test reads them back.
    std::string listed;
    for (const std::string& text : overrides) listed += text + "\n";
    parity::fuzz::write_file(file.parent_path() / "overrides.txt", listed);
  }
  // An override's error names the override ("--set train.lr=x: ..."), not the file.
  parity::fuzz::expect_success_or_input_error([&] { parity::load_case(file.string(), overrides); },
                                              {file.string(), "--set "});
  return 0;
}
