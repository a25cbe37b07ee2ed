// read_metrics on CSV (a header row with a "step" column, then numbers): the importer of what real
// training scripts log.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "parity/interop/metrics_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = parity::fuzz::fresh_dir() / "metrics.csv";
  parity::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  parity::fuzz::expect_success_or_input_error(
      [&] { parity::interop::read_metrics(file, parity::interop::MetricsFormat::kCsv); },
      {file.string()});
  return 0;
}
