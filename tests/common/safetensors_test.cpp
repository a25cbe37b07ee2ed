// safetensors reader/writer: round trips for every dtype, known-answer bytes built from the
// format spec, and one test per kind of bad file, each checking the message names the file,
// the tensor and the problem.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>

#include "parity/common/tensor_file.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::read_bytes;
using testing::write_bytes;

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  fs::path path(const std::string& name) const { return dir_.path(name); }

  testing::TempDir dir_;
};

std::string le_u64(uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

// A file with `header` (padded to 8 bytes with spaces) and `data_num_bytes` zero bytes.
std::string safetensors_bytes(std::string header, size_t data_num_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le_u64(header.size()) + header + std::string(data_num_bytes, '\0');
}

// A tensor whose bytes follow a simple pattern (0/1 for BOOL so the values are valid).
HostTensor patterned(DType dtype, Shape shape) {
  HostTensor tensor = HostTensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < tensor.bytes.size(); ++i) {
    unsigned value = dtype == DType::BOOL ? static_cast<unsigned>(i % 2) : (i * 37 + 11) % 256;
    tensor.bytes[i] = static_cast<std::byte>(value);
  }
  return tensor;
}

void expect_same_tensor(const HostTensor& expected, const HostTensor& actual,
                        const std::string& name) {
  EXPECT_EQ(actual.dtype, expected.dtype) << name;
  EXPECT_EQ(actual.shape, expected.shape) << name;
  EXPECT_EQ(actual.bytes, expected.bytes) << name;
}

constexpr DType kEveryDType[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                                 DType::I64, DType::U32, DType::U8,  DType::BOOL};

// ---- round trips --------------------------------------------------------------------------

TEST_F(SafetensorsTest, RoundTripsEveryDtypeAndShapeKind) {
  NamedTensors tensors;
  for (DType dtype : kEveryDType) {
    std::string prefix(dtype_name(dtype));
    tensors[prefix + ".matrix"] = patterned(dtype, {2, 3});
    tensors[prefix + ".scalar"] = patterned(dtype, {});
    tensors[prefix + ".empty"] = patterned(dtype, {0, 4});
    tensors[prefix + ".rank3"] = patterned(dtype, {3, 1, 2});
  }
  write_safetensors(path("all.safetensors"), tensors);

  SafetensorsFile file = read_safetensors(path("all.safetensors"));
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    ASSERT_EQ(file.tensors.count(name), 1u) << name;
    expect_same_tensor(tensor, file.tensors.at(name), name);
  }
  EXPECT_TRUE(file.metadata.empty());
}

TEST_F(SafetensorsTest, RoundTripsMetadata) {
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", "12"}, {"note", "quotes \" and unicode \xc3\xa9"}, {"", ""}};
  NamedTensors tensors = {{"w", HostTensor::from_f32({2}, {1.0f, -0.5f})}};
  write_safetensors(path("meta.safetensors"), tensors, metadata);

  SafetensorsFile file = read_safetensors(path("meta.safetensors"));
  EXPECT_EQ(file.metadata, metadata);
  expect_same_tensor(tensors.at("w"), file.tensors.at("w"), "w");
}

TEST_F(SafetensorsTest, RoundTripsAFileWithNoTensors) {
  write_safetensors(path("none.safetensors"), {});
  EXPECT_EQ(read_bytes(path("none.safetensors")), le_u64(8) + "{}      ");
  SafetensorsFile file = read_safetensors(path("none.safetensors"));
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_TRUE(file.metadata.empty());
}

TEST_F(SafetensorsTest, HeaderIsPaddedToEightBytes) {
  for (size_t name_num_bytes = 1; name_num_bytes <= 9; ++name_num_bytes) {
    write_safetensors(path("pad.safetensors"),
                      {{std::string(name_num_bytes, 'x'), patterned(DType::U8, {3})}});
    std::string bytes = read_bytes(path("pad.safetensors"));
    ASSERT_GE(bytes.size(), 8u);
    uint64_t header_num_bytes = 0;
    for (int i = 7; i >= 0; --i)
      header_num_bytes = (header_num_bytes << 8) | static_cast<unsigned char>(bytes[i]);
    EXPECT_EQ(header_num_bytes % 8, 0u) << name_num_bytes;
    EXPECT_EQ(bytes.size(), 8 + header_num_bytes + 3) << name_num_bytes;
  }
}

TEST_F(SafetensorsTest, WriteReplacesAnExistingFileAndLeavesNoTempFile) {
  write_bytes(path("w.safetensors"), "old content");
  write_safetensors(path("w.safetensors"), {{"a", patterned(DType::I32, {2})}});
  EXPECT_EQ(read_safetensors(path("w.safetensors")).tensors.size(), 1u);
  size_t num_files = 0;
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename(), "w.safetensors");
    ++num_files;
  }
  EXPECT_EQ(num_files, 1u);
}

// ---- known answers ------------------------------------------------------------------------
// The python `safetensors` package is not installed here, so these bytes are built by hand
// from the format spec (huggingface/safetensors README): u64 LE header length, the compact
// JSON header padded with spaces to a multiple of 8, then the data. Entry keys are in the
// order the reference serializer writes them (dtype, shape, data_offsets), "__metadata__"
// first. Data: bias = float32 {1.5, -2.0} = 00 00 c0 3f 00 00 00 c0; step = int64 7.

const std::string kBiasBytes("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8);
const std::string kStepBytes("\x07\x00\x00\x00\x00\x00\x00\x00", 8);

TEST_F(SafetensorsTest, WritesKnownAnswerBytes) {
  // 141 bytes of JSON + 3 spaces = 144 = 0x90.
  const std::string header =
      "{\"__metadata__\":{\"step\":\"3\"},"
      "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]}}   ";
  ASSERT_EQ(header.size(), 144u);
  const std::string expected =
      std::string("\x90\0\0\0\0\0\0\0", 8) + header + kBiasBytes + kStepBytes;

  HostTensor step = HostTensor::zeros(DType::I64, {});
  step.data_as<int64_t>()[0] = 7;
  write_safetensors(path("known.safetensors"),
                    {{"bias", HostTensor::from_f32({2}, {1.5f, -2.0f})}, {"step", step}},
                    {{"step", "3"}});
  EXPECT_EQ(read_bytes(path("known.safetensors")), expected);
}

TEST_F(SafetensorsTest, ReadsKnownAnswerBytesInReferenceOrder) {
  // The reference serializer stores tensors by descending alignment, then name, so "step"
  // (I64) comes first in the data although it sorts after "bias". 113 bytes + 7 spaces = 120.
  const std::string header =
      "{\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
      "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}       ";
  ASSERT_EQ(header.size(), 120u);
  write_bytes(path("ref.safetensors"),
              std::string("\x78\0\0\0\0\0\0\0", 8) + header + kStepBytes + kBiasBytes);

  SafetensorsFile file = read_safetensors(path("ref.safetensors"));
  ASSERT_EQ(file.tensors.size(), 2u);
  const HostTensor& bias = file.tensors.at("bias");
  EXPECT_EQ(bias.dtype, DType::F32);
  EXPECT_EQ(bias.shape, (Shape{2}));
  EXPECT_EQ(bias.data_as<float>()[0], 1.5f);
  EXPECT_EQ(bias.data_as<float>()[1], -2.0f);
  const HostTensor& step = file.tensors.at("step");
  EXPECT_EQ(step.dtype, DType::I64);
  EXPECT_EQ(step.shape, Shape{});
  EXPECT_EQ(step.data_as<int64_t>()[0], 7);
}

// ---- bad files ----------------------------------------------------------------------------

class SafetensorsBadFileTest : public SafetensorsTest {
 protected:
  // Writes `bytes` to bad.safetensors and expects the read to fail naming the file and
  // every substring.
  void expect_rejected(const std::string& bytes, std::initializer_list<std::string> substrings) {
    write_bytes(path("bad.safetensors"), bytes);
    expect_input_error([&] { read_safetensors(path("bad.safetensors")); }, substrings);
    expect_input_error([&] { read_safetensors(path("bad.safetensors")); },
                       {path("bad.safetensors").string()});
  }
  void expect_header_rejected(const std::string& header, size_t data_num_bytes,
                              std::initializer_list<std::string> substrings) {
    expect_rejected(safetensors_bytes(header, data_num_bytes), substrings);
  }
};

TEST_F(SafetensorsBadFileTest, MissingFile) {
  expect_input_error([&] { read_safetensors(path("absent.safetensors")); },
                     {"absent.safetensors", "cannot read"});
}

TEST_F(SafetensorsBadFileTest, FileShorterThanEightBytes) {
  expect_rejected(std::string("\x10\0\0", 3), {"file is 3 bytes", "8-byte header length"});
  expect_rejected("", {"file is 0 bytes"});
}

TEST_F(SafetensorsBadFileTest, HeaderLengthLargerThanFile) {
  expect_rejected(le_u64(1000) + "{}", {"header length 1000 bytes", "larger than the 2 bytes"});
}

TEST_F(SafetensorsBadFileTest, HeaderLengthAboveReferenceLimit) {
  expect_rejected(le_u64(100'000'001) + "{}", {"100000001", "100000000-byte limit"});
  expect_rejected(le_u64(~uint64_t{0}) + "{}", {"18446744073709551615", "limit"});
}

TEST_F(SafetensorsBadFileTest, HeaderNotJson) {
  expect_header_rejected("{\"a\": nope}", 0, {"header is not valid JSON"});
  expect_header_rejected("{\"a\": {", 0, {"header is not valid JSON"});
  expect_header_rejected(std::string("{\"\xff\": 1}"), 0, {"header is not valid JSON"});
}

TEST_F(SafetensorsBadFileTest, HeaderNotAnObject) {
  expect_header_rejected("[1, 2]", 0, {"header is a JSON array", "expected an object"});
}

TEST_F(SafetensorsBadFileTest, EntryNotAnObject) {
  expect_header_rejected("{\"w\": [1]}", 0, {"tensor 'w'", "entry is a JSON array"});
}

TEST_F(SafetensorsBadFileTest, EntryMissingFields) {
  expect_header_rejected(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4,
                         {"tensor 'w'", "no \"dtype\""});
  expect_header_rejected(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4,
                         {"tensor 'w'", "no \"shape\""});
  expect_header_rejected(R"({"w": {"dtype": "F32", "shape": [1]}})", 4,
                         {"tensor 'w'", "no \"data_offsets\"", "[begin, end]"});
}

TEST_F(SafetensorsBadFileTest, EntryFieldsOfWrongType) {
  expect_header_rejected(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", 4,
                         {"tensor 'w'", "\"dtype\" is a JSON number", "expected a string"});
  expect_header_rejected(R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4,
                         {"tensor 'w'", "\"shape\" is a JSON string", "expected an array"});
  expect_header_rejected(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4,
                         {"tensor 'w'", "dimension 0 (1.5) is not an integer"});
  expect_header_rejected(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4,
                         {"tensor 'w'", "\"data_offsets\" is [0]", "expected [begin, end]"});
  expect_header_rejected(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-1, 4]}})", 4,
                         {"tensor 'w'", "two non-negative integers"});
}

TEST_F(SafetensorsBadFileTest, UnknownDtypeListsKnownOnes) {
  expect_header_rejected(
      R"({"w": {"dtype": "I16", "shape": [2], "data_offsets": [0, 4]}})", 4,
      {"tensor 'w'", "unknown dtype \"I16\"", "F32, F64, F16, BF16, I32, I64, U32, U8, BOOL"});
}

TEST_F(SafetensorsBadFileTest, NegativeDimension) {
  expect_header_rejected(R"({"w": {"dtype": "U8", "shape": [2, -3], "data_offsets": [0, 6]}})", 6,
                         {"tensor 'w'", "dimension 1 (-3) is negative"});
}

TEST_F(SafetensorsBadFileTest, ShapeWhoseSizeOverflows) {
  expect_header_rejected(
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
      {"tensor 'w'", "overflow"});
}

TEST_F(SafetensorsBadFileTest, OffsetsBeginAfterEnd) {
  expect_header_rejected(R"({"w": {"dtype": "U8", "shape": [4], "data_offsets": [8, 4]}})", 8,
                         {"tensor 'w'", "[8,4]", "begin > end"});
}

TEST_F(SafetensorsBadFileTest, OffsetsEndBeyondDataBuffer) {
  expect_header_rejected(R"({"w": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})", 6,
                         {"tensor 'w'", "end beyond the data buffer", "holds 6 bytes"});
}

TEST_F(SafetensorsBadFileTest, OffsetsSpanDisagreesWithDtypeAndShape) {
  expect_header_rejected(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
                         {"tensor 'w'", "span 8 bytes", "dtype F32 and shape (3,) need 12 bytes"});
}

TEST_F(SafetensorsBadFileTest, OverlappingTensors) {
  expect_header_rejected(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                         12, {"tensor 'b'", "overlap tensor 'a'", "without overlap"});
  // Two tensors sharing the same bytes.
  expect_header_rejected(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                             "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})",
                         4, {"overlap tensor"});
}

TEST_F(SafetensorsBadFileTest, HoleBetweenTensors) {
  expect_header_rejected(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                             "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                         12, {"tensor 'b'", "hole of 4 unused bytes at offset 4", "contiguous"});
  expect_header_rejected(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
                         {"tensor 'a'", "hole of 4 unused bytes at offset 0"});
}

TEST_F(SafetensorsBadFileTest, TrailingBytesAfterLastTensor) {
  expect_header_rejected(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8,
                         {"holds 8 bytes", "cover only 4", "4 trailing bytes"});
}

TEST_F(SafetensorsBadFileTest, MetadataNotAStringMap) {
  expect_header_rejected(R"({"__metadata__": "x"})", 0,
                         {"\"__metadata__\" is a JSON string", "mapping strings to strings"});
  expect_header_rejected(R"({"__metadata__": {"epoch": 3}})", 0,
                         {"key 'epoch' is a JSON number", "expected a string"});
}

TEST_F(SafetensorsTest, WriteRejectsReservedTensorName) {
  expect_input_error(
      [&] {
        write_safetensors(path("w.safetensors"), {{"__metadata__", patterned(DType::U8, {1})}});
      },
      {"w.safetensors", "\"__metadata__\"", "reserves"});
  EXPECT_FALSE(fs::exists(path("w.safetensors")));
}

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryNamesThePath) {
  expect_input_error(
      [&] {
        write_safetensors(path("no_such_dir/w.safetensors"), {{"a", patterned(DType::U8, {1})}});
      },
      {"cannot write safetensors file", "no_such_dir/w.safetensors"});
}

}  // namespace
}  // namespace parity
