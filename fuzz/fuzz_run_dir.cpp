// read_run_dir on a run directory: run.json (the first part of the input) and metrics.jsonl (the
// second, after kPartSeparator; absent when there is no separator, which the reader must refuse
// too). Tensor files are read_safetensors' business (fuzz_safetensors).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "parity/common/run_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = parity::fuzz::split_parts(data, size, 2);
  const auto dir = parity::fuzz::fresh_dir();
  parity::fuzz::write_file(dir / "run.json", parts[0]);
  if (parts.size() > 1) parity::fuzz::write_file(dir / "metrics.jsonl", parts[1]);
  parity::fuzz::expect_success_or_input_error([&] { parity::read_run_dir(dir); }, {dir.string()});
  return 0;
}
