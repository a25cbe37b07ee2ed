// .npz reader: archives numpy itself wrote (tests/data/npz, made by make_npz.py there with
// numpy 1.24.2), stored and deflated, checked against the values numpy printed beside them; and
// one test per kind of bad archive, each checking that the message names the file and member.
#include <gtest/gtest.h>
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "parity/common/tensor_file.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

const fs::path kDataDir = PARITY_NPZ_DIR;

// The values numpy listed in expected.json, as doubles, row-major.
std::vector<double> values_as_doubles(const HostTensor& tensor) {
  std::vector<double> values;
  for (size_t i = 0; i < tensor.num_elements(); ++i) {
    switch (tensor.dtype) {
      case DType::F32:
        values.push_back(tensor.data_as<float>()[i]);
        break;
      case DType::F64:
        values.push_back(tensor.data_as<double>()[i]);
        break;
      case DType::I32:
        values.push_back(tensor.data_as<int32_t>()[i]);
        break;
      case DType::I64:
        values.push_back(static_cast<double>(tensor.data_as<int64_t>()[i]));
        break;
      case DType::BOOL:
        values.push_back(tensor.data_as<uint8_t>()[i] != 0 ? 1 : 0);
        break;
      default:
        ADD_FAILURE() << "unexpected dtype " << dtype_name(tensor.dtype);
    }
  }
  return values;
}

void expect_numpy_values(const NamedTensors& tensors) {
  std::ifstream in(kDataDir / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  ASSERT_EQ(tensors.size(), expected["arrays"].size());
  const std::map<std::string, DType> dtypes = {{"float32", DType::F32},
                                               {"float64", DType::F64},
                                               {"int32", DType::I32},
                                               {"int64", DType::I64},
                                               {"bool", DType::BOOL}};
  for (const auto& [name, array] : expected["arrays"].items()) {
    SCOPED_TRACE(name);
    ASSERT_EQ(tensors.count(name), 1u);
    const HostTensor& tensor = tensors.at(name);
    EXPECT_EQ(tensor.dtype, dtypes.at(array["dtype"].get<std::string>()));
    EXPECT_EQ(tensor.shape, array["shape"].get<Shape>());
    std::vector<double> values;
    for (const auto& value : array["values"]) {
      values.push_back(value.is_boolean() ? (value.get<bool>() ? 1 : 0) : value.get<double>());
    }
    EXPECT_EQ(values_as_doubles(tensor), values);
  }
}

TEST(Npz, StoredArchiveFromNpSavezReadsAsNumpyWroteIt) {
  expect_numpy_values(read_npz(kDataDir / "stored.npz"));
}

TEST(Npz, DeflatedArchiveFromNpSavezCompressedReadsAsNumpyWroteIt) {
  expect_numpy_values(read_npz(kDataDir / "deflated.npz"));
}

// An archive of the given members, written with libzip (deflated when asked).
void write_zip(const fs::path& path,
               const std::vector<std::pair<std::string, std::string>>& members, bool deflate) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  ASSERT_NE(archive, nullptr) << code;
  for (const auto& [name, bytes] : members) {
    zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    const zip_int64_t index = zip_file_add(archive, name.c_str(), source, ZIP_FL_OVERWRITE);
    ASSERT_GE(index, 0);
    zip_set_file_compression(archive, static_cast<zip_uint64_t>(index),
                             deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  ASSERT_EQ(zip_close(archive), 0);
}

// The bytes of one .npy file, written by parity's writer.
std::string npy_bytes(const HostTensor& tensor, const TempDir& dir) {
  write_npy(dir.path("member.npy"), tensor);
  return read_bytes(dir.path("member.npy"));
}

TEST(Npz, AFlippedByteInAStoredMemberFailsItsCrc) {
  TempDir dir;
  std::string bytes = read_bytes(kDataDir / "stored.npz");
  // kernel's 0.25f (00 00 80 3e) lies in the stored member's data; its CRC no longer matches.
  const std::string quarter("\x00\x00\x80\x3e", 4);
  const size_t at = bytes.find(quarter);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = '\x3f';
  write_bytes(dir.path("flipped.npz"), bytes);
  expect_input_error([&] { read_npz(dir.path("flipped.npz")); },
                     {"flipped.npz", "member", "kernel.npy", "CRC"});
}

TEST(Npz, ADamagedDeflateStreamIsRefused) {
  TempDir dir;
  std::string bytes = read_bytes(kDataDir / "deflated.npz");
  // The first member's compressed data starts after its 30-byte local header and its name.
  const size_t name_length = static_cast<unsigned char>(bytes[26]);
  const size_t extra_length = static_cast<unsigned char>(bytes[28]);
  const size_t data = 30 + name_length + extra_length;
  for (size_t i = data; i < data + 16; ++i) bytes[i] = static_cast<char>(~bytes[i]);
  write_bytes(dir.path("damaged.npz"), bytes);
  expect_input_error([&] { read_npz(dir.path("damaged.npz")); }, {"damaged.npz", "member 0"});
}

TEST(Npz, ATruncatedArchiveIsRefusedAsNotAZip) {
  TempDir dir;
  const std::string bytes = read_bytes(kDataDir / "stored.npz");
  write_bytes(dir.path("cut.npz"), bytes.substr(0, bytes.size() / 2));
  expect_input_error([&] { read_npz(dir.path("cut.npz")); },
                     {"npz file", "cut.npz", "cannot open it as a zip archive"});
}

TEST(Npz, AnNpyFileIsNotAnArchive) {
  TempDir dir;
  write_npy(dir.path("single.npz"), HostTensor::from_f32({2}, {1, 2}));
  expect_input_error([&] { read_npz(dir.path("single.npz")); },
                     {"single.npz", "Not a zip archive", "is this an .npy"});
}

TEST(Npz, AMemberThatIsNotAnNpyFileIsRefused) {
  expect_input_error([&] { read_npz(kDataDir / "not_npy_member.npz"); },
                     {"not_npy_member.npz", "member 1 'notes.txt' is not an .npy file"});
}

TEST(Npz, AnNpyMemberWithAnUnknownDtypeNamesTheArchiveAndMember) {
  TempDir dir;
  std::string member = npy_bytes(HostTensor::from_f32({2}, {1, 2}), dir);
  const size_t descr = member.find("<f4");
  ASSERT_NE(descr, std::string::npos);
  member.replace(descr, 3, "<c8");  // complex64: numpy has it, parity does not read it
  for (bool deflate : {false, true}) {
    write_zip(dir.path("complex.npz"), {{"w.npy", member}}, deflate);
    expect_input_error(
        [&] { read_npz(dir.path("complex.npz")); },
        {"'" + dir.path("complex.npz").string() + "' member 'w.npy'", "unsupported descr '<c8'"});
  }
}

TEST(Npz, MembersNamedAsNpSavezNamesThemReadUnderNpLoadsNames) {
  TempDir dir;
  write_zip(dir.path("nested.npz"),
            {{"params/Dense_0/kernel.npy", npy_bytes(HostTensor::from_f32({1, 2}, {1, 2}), dir)},
             {"params/Dense_0/bias.npy", npy_bytes(HostTensor::from_f32({2}, {3, 4}), dir)}},
            true);
  const NamedTensors tensors = read_npz(dir.path("nested.npz"));
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors.at("params/Dense_0/kernel").shape, (Shape{1, 2}));
  EXPECT_EQ(tensors.at("params/Dense_0/bias").data_as<float>()[1], 4.0f);
}

TEST(Npz, AZeroElementMemberReads) {
  TempDir dir;
  write_zip(dir.path("empty.npz"), {{"a.npy", npy_bytes(HostTensor::from_f32({0}, {}), dir)}},
            false);
  const NamedTensors tensors = read_npz(dir.path("empty.npz"));
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors.at("a").num_elements(), 0u);
}

}  // namespace
}  // namespace parity
