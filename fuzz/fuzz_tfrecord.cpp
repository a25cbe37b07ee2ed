// read_tfrecords on arbitrary bytes: record framing, lengths and both CRC-32C checksums.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "parity/interop/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = parity::fuzz::fresh_dir() / "events.out.tfevents.fuzz";
  parity::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  parity::fuzz::expect_success_or_input_error([&] { parity::interop::read_tfrecords(file); },
                                              {file.string()});
  return 0;
}
