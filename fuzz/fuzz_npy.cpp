// read_npy on arbitrary bytes: magic, version, header length, the Python-literal header dict
// (descr, fortran_order, shape) and the data size it implies.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "parity/common/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = parity::fuzz::fresh_dir() / "tensor.npy";
  parity::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  parity::fuzz::expect_success_or_input_error([&] { parity::read_npy(file); }, {file.string()});
  return 0;
}
