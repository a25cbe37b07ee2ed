// read_npz: the zip structure (libzip), each member's name, size, compression and CRC-32, and
// each member as an .npy file. Input: one mode byte, then
//   bit 0 set:   the archive's bytes as they are (zip records, sizes, offsets, CRCs);
//   bit 0 clear: name, data, name, data, ... separated by kPartSeparator, written by the target
//                as a well-formed archive with correct CRCs, stored or (bit 1) deflated, so that
//                the fuzzer reaches member names and the .npy data inside members: libzip
//                checks a member's CRC-32, which random changes to its bytes never match.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "parity/common/tensor_file.h"

namespace {

void append_le(std::string& out, uint64_t value, int width) {
  for (int b = 0; b < width; ++b) out.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
}

// zlib's windowBits for raw deflate (no zlib header), as zip's method 8 stores it.
constexpr int kRawDeflateWindowBits = -15;

// A zip archive (PKWARE APPNOTE 4.3: local headers, central directory, end record) of
// `members` (name, data), every size and CRC-32 correct.
std::string zip_archive(const std::vector<std::pair<std::string_view, std::string_view>>& members,
                        bool deflated) {
  const uint16_t method = deflated ? 8 : 0;
  std::string archive, directory;
  for (const auto& [name, data] : members) {
    const std::string stored =
        deflated ? parity::fuzz::deflate_bytes(data, kRawDeflateWindowBits) : std::string(data);
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const auto offset = archive.size();
    // Fields both headers share, from "version needed" to the name's length.
    std::string common;
    append_le(common, 20, 2);      // version needed: 2.0
    append_le(common, 0, 2);       // flags
    append_le(common, method, 2);  // compression
    append_le(common, 0, 2);       // time
    append_le(common, 0x21, 2);    // date: 1980-01-01
    append_le(common, crc, 4);
    append_le(common, stored.size(), 4);
    append_le(common, data.size(), 4);
    append_le(common, name.size(), 2);
    append_le(common, 0, 2);  // extra field length

    append_le(archive, 0x04034b50, 4);
    archive += common;
    archive += name;
    archive += stored;

    append_le(directory, 0x02014b50, 4);
    append_le(directory, 20, 2);  // version made by
    directory += common;
    append_le(directory, 0, 2);  // comment length
    append_le(directory, 0, 2);  // disk
    append_le(directory, 0, 2);  // internal attributes
    append_le(directory, 0, 4);  // external attributes
    append_le(directory, offset, 4);
    directory += name;
  }
  const auto directory_offset = archive.size();
  archive += directory;
  append_le(archive, 0x06054b50, 4);
  append_le(archive, 0, 2);
  append_le(archive, 0, 2);
  append_le(archive, members.size(), 2);
  append_le(archive, members.size(), 2);
  append_le(archive, directory.size(), 4);
  append_le(archive, directory_offset, 4);
  append_le(archive, 0, 2);  // comment length
  return archive;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string archive;
  if ((mode & 1u) != 0) {
    archive.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    const std::vector<std::string_view> parts = parity::fuzz::split_parts(data + 1, size - 1, 32);
    std::vector<std::pair<std::string_view, std::string_view>> members;
    for (size_t i = 0; i < parts.size(); i += 2) {
      members.emplace_back(parts[i], i + 1 < parts.size() ? parts[i + 1] : std::string_view());
    }
    archive = zip_archive(members, (mode & 2u) != 0);
  }
  const auto file = parity::fuzz::fresh_dir() / "tensors.npz";
  parity::fuzz::write_file(file, archive);
  parity::fuzz::expect_success_or_input_error([&] { parity::read_npz(file); }, {file.string()});
  return 0;
}
