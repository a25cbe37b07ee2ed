// load_fashion_mnist_from on a directory holding one split's two IDX files. Input: one mode byte,
// then the images file and the labels file separated by kPartSeparator. Mode bit 0 clear: the
// target gzips both parts, so that the fuzzer works on the IDX headers and data; set: the parts
// are written as they are, for the reader's handling of files that are not (valid) gzip. Bit 1
// picks the split ("train" or "test").
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "parity/common/dataset.h"

namespace {

// zlib's windowBits for a gzip header and trailer (15 + 16) instead of zlib's.
constexpr int kGzipWindowBits = 15 + 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const bool raw = (mode & 1u) != 0;
  const bool train = (mode & 2u) == 0;
  const std::vector<std::string_view> parts = parity::fuzz::split_parts(data + 1, size - 1, 2);
  const std::string_view images = parts[0];
  const std::string_view labels = parts.size() > 1 ? parts[1] : std::string_view();

  const auto dir = parity::fuzz::fresh_dir();
  const std::string prefix = train ? "train" : "t10k";
  parity::fuzz::write_file(dir / (prefix + "-images-idx3-ubyte.gz"),
                           raw ? images : parity::fuzz::deflate_bytes(images, kGzipWindowBits));
  parity::fuzz::write_file(dir / (prefix + "-labels-idx1-ubyte.gz"),
                           raw ? labels : parity::fuzz::deflate_bytes(labels, kGzipWindowBits));
  parity::fuzz::expect_success_or_input_error(
      [&] { parity::load_fashion_mnist_from(dir, train ? "train" : "test"); }, {dir.string()});
  return 0;
}
