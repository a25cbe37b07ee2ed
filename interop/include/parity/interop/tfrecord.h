// TFRecord files (TensorBoard's events.out.tfevents.* among them): a sequence of records, each
//   uint64 length | uint32 masked_crc32c(length bytes) | length bytes of data |
//   uint32 masked_crc32c(data)
// little-endian (tensorboard/summary/writer/record_writer.py). Both checksums are verified.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace parity::interop {

struct Record {
  uint64_t offset = 0;  // of the record's first byte in the file
  std::string data;
};

// Every record of the file, in order. Throws InputError naming the file, the record's byte
// offset and what is wrong: a header or data cut short, a length or data checksum that does not
// match (a damaged or not-TFRecord file). A file that ends cleanly after a record is complete.
std::vector<Record> read_tfrecords(const std::filesystem::path& path);

}  // namespace parity::interop
