// TensorBoard event files written by real writers (PyTorch's SummaryWriter, TensorFlow 1.12's
// FileWriter; tests/data/tfevents/README.md says where each comes from). Every scalar must come
// out as the independent decoder beside them recorded it in expected.json (checked there against
// Google's protobuf runtime too): tag, step, value and wall time exactly, in file order. Damaged
// copies are refused with the file, the record and the byte.
#include "parity/interop/tf_events.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "parity/common/error.h"
#include "parity/interop/crc32c.h"
#include "test_files.h"

namespace parity::interop {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kData = PARITY_TFEVENTS_DIR;

std::filesystem::path event_file(const std::string& folder) {
  for (const auto& entry : std::filesystem::directory_iterator(kData / folder)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) return entry.path();
  }
  return {};
}

void expect_as_recorded(const std::string& folder) {
  std::ifstream in(kData / folder / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const EventFile file = read_event_file(event_file(folder));
  EXPECT_EQ(file.records, expected.at("records").get<int64_t>());
  EXPECT_EQ(file.file_version, expected.at("file_version").get<std::string>());
  for (const auto& [kind, count] : expected.at("event_kinds").items()) {
    EXPECT_EQ(file.event_kinds.count(kind) ? file.event_kinds.at(kind) : 0, count.get<int64_t>())
        << kind;
  }
  const nlohmann::json& scalars = expected.at("scalars");
  ASSERT_EQ(file.scalars.size(), scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) {
    const EventScalar& got = file.scalars[i];
    EXPECT_EQ(got.tag, scalars[i].at("tag").get<std::string>()) << i;
    EXPECT_EQ(got.step, scalars[i].at("step").get<int64_t>()) << i;
    EXPECT_EQ(got.value, scalars[i].at("value").get<double>()) << i;  // exact
    EXPECT_EQ(got.wall_time, scalars[i].at("wall_time").get<double>()) << i;
    EXPECT_EQ(got.encoding, scalars[i].at("encoding").get<std::string>()) << i;
    EXPECT_EQ(got.dtype, scalars[i].at("dtype").get<std::string>()) << i;
  }
}

TEST(TfEvents, PytorchSummaryWriterScalarsAreReadExactly) {
  expect_as_recorded("pytorch-summarywriter");
}

TEST(TfEvents, TensorflowFileWriterScalarsAreReadAndItsGraphsSkipped) {
  expect_as_recorded("tf1-keras-filewriter");
}

// RFC 3720 §B.4's test vectors: 32 bytes of zeros, of 0xff, and 0..31.
TEST(Crc32c, MatchesTheRfc3720Vectors) {
  std::string bytes(32, '\0');
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x8A9136AAu);
  bytes.assign(32, '\xff');
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), 0x46DD794Eu);
}

// ---- Scalars written as tensors (tf.summary.scalar in TF2, CLU): no real file of that kind is
// in tests/data, so events are built here byte by byte from the field numbers of
// tensorboard/compat/proto/{event,summary,tensor,tensor_shape}.proto and framed as
// record_writer.py frames them. The expected values are the ones encoded.

std::string varint(uint64_t value) {
  std::string out;
  do {
    out.push_back(static_cast<char>((value & 0x7f) | (value > 0x7f ? 0x80 : 0)));
    value >>= 7;
  } while (value != 0);
  return out;
}

std::string little_endian(uint64_t bits, int width) {
  std::string out;
  for (int b = 0; b < width; ++b) out.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
  return out;
}

std::string bytes_field(uint32_t number, const std::string& payload) {
  return varint(number << 3 | 2) + varint(payload.size()) + payload;
}

std::string varint_field(uint32_t number, uint64_t value) {
  return varint(number << 3) + varint(value);
}

std::string record(const std::string& data) {
  const std::string length = little_endian(data.size(), 8);
  return length + little_endian(masked_crc32c(length.data(), 8), 4) + data +
         little_endian(masked_crc32c(data.data(), data.size()), 4);
}

// An Event at `step` with one Summary.Value tag "loss" holding `tensor`.
std::string tensor_event(int64_t step, const std::string& tensor) {
  const std::string value = bytes_field(1, "loss") + bytes_field(8, tensor);
  return record(varint_field(2, static_cast<uint64_t>(step)) +
                bytes_field(5, bytes_field(1, value)));
}

TEST(TfEvents, ScalarsWrittenAsTensorsAreReadInEveryEncoding) {
  testing::TempDir dir;
  float quarter = 0.25f;
  uint32_t quarter_bits = 0;
  std::memcpy(&quarter_bits, &quarter, 4);
  double third = 1.0 / 3.0;
  uint64_t third_bits = 0;
  std::memcpy(&third_bits, &third, 8);
  const std::string scalar_shape = bytes_field(2, "");  // TensorShapeProto with no dims
  const std::string one_dim = bytes_field(2, bytes_field(2, varint_field(1, 1)));  // shape [1]
  const std::string events =
      // DT_FLOAT (1), float_val (5) packed
      tensor_event(
          0, varint_field(1, 1) + scalar_shape + bytes_field(5, little_endian(quarter_bits, 4))) +
      // DT_DOUBLE (2), tensor_content (4), shape [1]
      tensor_event(1, varint_field(1, 2) + one_dim + bytes_field(4, little_endian(third_bits, 8))) +
      // DT_HALF (19), half_val (13) packed: 0x3C00 is 1.0, 0xC000 is -2.0
      tensor_event(2, varint_field(1, 19) + scalar_shape + bytes_field(13, varint(0xC000))) +
      // DT_BFLOAT16 (14), half_val: 0x3FC0 is 1.5
      tensor_event(3, varint_field(1, 14) + scalar_shape + bytes_field(13, varint(0x3FC0))) +
      // DT_INT64 (9), int64_val (10) packed
      tensor_event(4, varint_field(1, 9) + scalar_shape + bytes_field(10, varint(7))) +
      // A [3] float tensor: not a scalar, skipped and counted
      tensor_event(5, varint_field(1, 1) + bytes_field(2, bytes_field(2, varint_field(1, 3))) +
                          bytes_field(4, std::string(12, '\0')));
  const std::string path = dir.path("events.out.tfevents.0.test").string();
  std::ofstream(path, std::ios::binary) << events;

  const EventFile file = read_event_file(path);
  ASSERT_EQ(file.scalars.size(), 5u);
  const std::vector<std::pair<double, std::string>> expected = {{0.25, "DT_FLOAT"},
                                                                {1.0 / 3.0, "DT_DOUBLE"},
                                                                {-2.0, "DT_HALF"},
                                                                {1.5, "DT_BFLOAT16"},
                                                                {7.0, "DT_INT64"}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(file.scalars[i].value, expected[i].first) << i;
    EXPECT_EQ(file.scalars[i].dtype, expected[i].second) << i;
    EXPECT_EQ(file.scalars[i].encoding, "tensor") << i;
    EXPECT_EQ(file.scalars[i].step, static_cast<int64_t>(i));
  }
  EXPECT_EQ(file.skipped_tags.at("loss"), 1);
}

// A field of the wrong wire type (file_version, a string, sent as a varint after the Summary's
// bytes) is read as empty, not as the previous field's bytes.
TEST(TfEvents, AFieldOfAnotherWireTypeDoesNotShowThePreviousFieldsBytes) {
  testing::TempDir dir;
  const std::string value = bytes_field(1, "loss") + bytes_field(8, varint_field(1, 1));
  const std::string path = dir.path("events.out.tfevents.0.wire").string();
  std::ofstream(path, std::ios::binary)
      << record(bytes_field(5, bytes_field(1, value)) + varint_field(3, 7));
  EXPECT_EQ(read_event_file(path).file_version, "");
}

std::string damaged_copy(const testing::TempDir& dir, const std::string& name,
                         const std::function<void(std::string&)>& damage) {
  std::ifstream in(event_file("pytorch-summarywriter"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  damage(bytes);
  const std::string path = dir.path(name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string error_of(const std::string& path) {
  try {
    read_event_file(path);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(TfEvents, DamagedFilesAreRefusedWithTheRecordAndTheByte) {
  testing::TempDir dir;
  // Record 0 is 12 + 24 + 4 bytes (the file_version event); record 1 starts at byte 40.
  const std::string flipped = damaged_copy(dir, "flipped", [](std::string& b) { b[60] ^= 1; });
  EXPECT_THAT(error_of(flipped), HasSubstr(flipped + ": record 1 at byte 40: the checksum of its"));
  const std::string cut = damaged_copy(dir, "cut", [](std::string& b) { b.resize(b.size() - 3); });
  EXPECT_THAT(error_of(cut), HasSubstr("(truncated)"));
  const std::string length = damaged_copy(dir, "length", [](std::string& b) { b[40] ^= 0x10; });
  EXPECT_THAT(error_of(length),
              HasSubstr("record 1 at byte 40: the length's checksum does not match"));
  const std::string text = dir.path("notes.txt").string();
  std::ofstream(text) << "loss,0.5\nloss,0.4\n";
  EXPECT_THAT(error_of(text), HasSubstr("record 0 at byte 0"));
}

}  // namespace
}  // namespace parity::interop
