// read_event_file past the framing: every part of the input (split at kPartSeparator) becomes
// one TFRecord with correct length and data checksums, so that the fuzzer spends its time in the
// protobuf wire reading of Event, Summary, Value and TensorProto messages instead of on CRCs
// (fuzz_tfrecord fuzzes the framing itself).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "parity/interop/crc32c.h"
#include "parity/interop/tf_events.h"

namespace {

void append_le(std::string& out, uint64_t value, int width) {
  for (int b = 0; b < width; ++b) out.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file_bytes;
  for (std::string_view payload : parity::fuzz::split_parts(data, size, 64)) {
    std::string length;
    append_le(length, payload.size(), 8);
    file_bytes += length;
    append_le(file_bytes, parity::interop::masked_crc32c(length.data(), length.size()), 4);
    file_bytes += payload;
    append_le(file_bytes, parity::interop::masked_crc32c(payload.data(), payload.size()), 4);
  }
  const auto file = parity::fuzz::fresh_dir() / "events.out.tfevents.fuzz";
  parity::fuzz::write_file(file, file_bytes);
  parity::fuzz::expect_success_or_input_error([&] { parity::interop::read_event_file(file); },
                                              {file.string()});
  return 0;
}
