// read_npz on arbitrary bytes: the zip structure (libzip), each member's name, size and CRC-32,
// and each member as an .npy file.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "parity/common/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = parity::fuzz::fresh_dir() / "tensors.npz";
  parity::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  parity::fuzz::expect_success_or_input_error([&] { parity::read_npz(file); }, {file.string()});
  return 0;
}
