// read_safetensors on arbitrary bytes: the 8-byte header length, the JSON header (dtypes, shapes,
// data offsets, __metadata__) and the data it points at.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "parity/common/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = parity::fuzz::fresh_dir() / "tensors.safetensors";
  parity::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  parity::fuzz::expect_success_or_input_error([&] { parity::read_safetensors(file); },
                                              {file.string()});
  return 0;
}
