#include "parity/interop/tfrecord.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "parity/common/error.h"
#include "parity/interop/crc32c.h"

namespace parity::interop {
namespace {

uint64_t little_endian(const std::string& bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int b = 0; b < width; ++b) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + b])) << (8 * b);
  }
  return value;
}

}  // namespace

std::vector<Record> read_tfrecords(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open", path.string()));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Record> records;
  size_t at = 0;
  while (at < bytes.size()) {
    const auto fail = [&](const std::string& what) {
      return InputError(
          fmt::format("{}: record {} at byte {}: {}", path.string(), records.size(), at, what));
    };
    if (bytes.size() - at < 12) {
      throw fail(fmt::format("the file ends {} bytes into the 12-byte record header (truncated)",
                             bytes.size() - at));
    }
    const uint64_t length = little_endian(bytes, at, 8);
    const auto stored_length_crc = static_cast<uint32_t>(little_endian(bytes, at + 8, 4));
    if (masked_crc32c(bytes.data() + at, 8) != stored_length_crc) {
      throw fail("the length's checksum does not match (a damaged file, or not a TFRecord file)");
    }
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4) {
      throw fail(
          fmt::format("the record says {} bytes of data and a checksum, but only {} bytes "
                      "remain (truncated)",
                      length, bytes.size() - at - 12));
    }
    const size_t data_at = at + 12;
    const auto stored_data_crc = static_cast<uint32_t>(little_endian(bytes, data_at + length, 4));
    if (masked_crc32c(bytes.data() + data_at, length) != stored_data_crc) {
      throw fail(
          fmt::format("the checksum of its {} data bytes does not match (damaged data)", length));
    }
    records.push_back({at, bytes.substr(data_at, length)});
    at = data_at + length + 4;
  }
  return records;
}

}  // namespace parity::interop
