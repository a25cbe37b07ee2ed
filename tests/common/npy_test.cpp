// .npy reader/writer: round trips, known-answer bytes written by numpy itself, Fortran order,
// version 2.0/3.0 headers, and one test per kind of bad file, each checking the message.
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

// ---- known answers from numpy -------------------------------------------------------------
// Produced with numpy 1.24.2 (Debian bookworm's python3-numpy, /usr/bin/python3) by:
//
//   import io, numpy as np
//   def save(a, version=None):
//       b = io.BytesIO()
//       if version is None: np.save(b, a)
//       else: np.lib.format.write_array(b, a, version=version)
//       return b.getvalue()
//   kF32Matrix   = save(np.array([[1.5, -2.0, 0.25], [4.0, 5.0, 6.0]], dtype='<f4'))
//   kI32Fortran  = save(np.arange(6, dtype=np.int32).reshape(2, 3).T)  # fortran_order True
//   kU32Version2 = save(np.array([1, 2, 3], dtype='<u4'), version=(2, 0))
//   kF64Version3 = save(np.array([0.5, -1.0], dtype='<f8'), version=(3, 0))
//   kI64Scalar   = save(np.array(7, dtype=np.int64))
//   kBoolVector  = save(np.array([True, False, True]))
//
// and printed as hex, 16 bytes a line.
// clang-format off
const unsigned char kF32Matrix[152] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73,
    0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32, 0x2c, 0x20,
    0x33, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x80, 0x40,
    0x00, 0x00, 0xa0, 0x40, 0x00, 0x00, 0xc0, 0x40,
};
const unsigned char kI32Fortran[152] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x69, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x54, 0x72, 0x75, 0x65,
    0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x33, 0x2c, 0x20, 0x32,
    0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    0x04, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
};
const unsigned char kU32Version2[140] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x02, 0x00, 0x74, 0x00, 0x00, 0x00, 0x7b, 0x27, 0x64, 0x65,
    0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x75, 0x34, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f,
    0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61,
    0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x33,
    0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
};
const unsigned char kF64Version3[144] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x03, 0x00, 0x74, 0x00, 0x00, 0x00, 0x7b, 0x27, 0x64, 0x65,
    0x73, 0x63, 0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x66, 0x38, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f,
    0x72, 0x74, 0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61,
    0x6c, 0x73, 0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x32,
    0x2c, 0x29, 0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0xbf,
};
const unsigned char kI64Scalar[136] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x3c, 0x69, 0x38, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73,
    0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x29, 0x2c, 0x20,
    0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
const unsigned char kBoolVector[131] = {
    0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00, 0x76, 0x00, 0x7b, 0x27, 0x64, 0x65, 0x73, 0x63,
    0x72, 0x27, 0x3a, 0x20, 0x27, 0x7c, 0x62, 0x31, 0x27, 0x2c, 0x20, 0x27, 0x66, 0x6f, 0x72, 0x74,
    0x72, 0x61, 0x6e, 0x5f, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x27, 0x3a, 0x20, 0x46, 0x61, 0x6c, 0x73,
    0x65, 0x2c, 0x20, 0x27, 0x73, 0x68, 0x61, 0x70, 0x65, 0x27, 0x3a, 0x20, 0x28, 0x33, 0x2c, 0x29,
    0x2c, 0x20, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x0a,
    0x01, 0x00, 0x01,
};
// clang-format on

template <size_t N>
std::string as_string(const unsigned char (&bytes)[N]) {
  return std::string(reinterpret_cast<const char*>(bytes), N);
}

// A fresh directory per test, removed afterwards.
class NpyTest : public ::testing::Test {
 protected:
  fs::path path(const std::string& name) const { return dir_.path(name); }

  testing::TempDir dir_;
};

// A .npy file with header dict `dict` and `data_num_bytes` zero bytes; version 1 uses a u16
// header length, versions 2 and 3 a u32. No alignment padding: readers must not need it.
std::string npy_bytes(const std::string& dict, size_t data_num_bytes, int version = 1) {
  std::string header = dict + "\n";
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  size_t length_num_bytes = version == 1 ? 2 : 4;
  for (size_t i = 0; i < length_num_bytes; ++i) {
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  return out + header + std::string(data_num_bytes, '\0');
}

HostTensor patterned(DType dtype, Shape shape) {
  HostTensor tensor = HostTensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < tensor.bytes.size(); ++i) {
    unsigned value = dtype == DType::BOOL ? static_cast<unsigned>(i % 2) : (i * 37 + 11) % 256;
    tensor.bytes[i] = static_cast<std::byte>(value);
  }
  return tensor;
}

// Every dtype .npy can hold (all but BF16).
constexpr DType kNpyDTypes[] = {DType::F32, DType::F64, DType::F16, DType::I32,
                                DType::I64, DType::U32, DType::U8,  DType::BOOL};

// ---- round trips --------------------------------------------------------------------------

TEST_F(NpyTest, RoundTripsEveryDtypeAndShapeKind) {
  const Shape shapes[] = {{2, 3}, {}, {0, 3}, {5}, {3, 0, 2}, {2, 1, 3, 1}};
  for (DType dtype : kNpyDTypes) {
    for (const Shape& shape : shapes) {
      std::string label = std::string(dtype_name(dtype)) + " " + shape_to_string(shape);
      HostTensor tensor = patterned(dtype, shape);
      write_npy(path("t.npy"), tensor);
      HostTensor back = read_npy(path("t.npy"));
      EXPECT_EQ(back.dtype, dtype) << label;
      EXPECT_EQ(back.shape, shape) << label;
      EXPECT_EQ(back.bytes, tensor.bytes) << label;
    }
  }
}

TEST_F(NpyTest, WritesVersion1WithDataAlignedTo64Bytes) {
  write_npy(path("t.npy"), patterned(DType::F32, {123456789, 0}));
  std::string bytes = read_bytes(path("t.npy"));
  ASSERT_EQ(bytes.size() % 64, 0u);
  EXPECT_EQ(bytes[6], '\x01');
  EXPECT_EQ(bytes.back(), '\n');
}

TEST_F(NpyTest, WritesVersion2WhenTheHeaderExceeds65535Bytes) {
  // 22000 dims of size 1: "1, " each, a header of about 66000 bytes.
  HostTensor tensor = patterned(DType::I32, Shape(22000, 1));
  write_npy(path("long.npy"), tensor);
  std::string bytes = read_bytes(path("long.npy"));
  ASSERT_GT(bytes.size(), 12u);
  EXPECT_EQ(bytes[6], '\x02');
  EXPECT_EQ((bytes.size() - tensor.num_bytes()) % 64, 0u);
  HostTensor back = read_npy(path("long.npy"));
  EXPECT_EQ(back.shape, tensor.shape);
  EXPECT_EQ(back.bytes, tensor.bytes);
}

TEST_F(NpyTest, WriteReplacesAnExistingFileAndLeavesNoTempFile) {
  write_bytes(path("t.npy"), "old");
  write_npy(path("t.npy"), patterned(DType::U8, {4}));
  EXPECT_EQ(read_npy(path("t.npy")).shape, Shape{4});
  size_t num_files = 0;
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename(), "t.npy");
    ++num_files;
  }
  EXPECT_EQ(num_files, 1u);
}

TEST_F(NpyTest, WriteBf16ExplainsNumpyHasNoBfloat16) {
  expect_input_error([&] { write_npy(path("b.npy"), patterned(DType::BF16, {2})); },
                     {"b.npy", "BF16", "numpy has no bfloat16", "safetensors"});
  EXPECT_FALSE(fs::exists(path("b.npy")));
}

TEST_F(NpyTest, WriteIntoMissingDirectoryNamesThePath) {
  expect_input_error([&] { write_npy(path("no_such_dir/t.npy"), patterned(DType::U8, {1})); },
                     {"cannot write npy file", "no_such_dir/t.npy"});
}

// ---- known answers ------------------------------------------------------------------------

TEST_F(NpyTest, ReadsNumpyFloat32Matrix) {
  write_bytes(path("k.npy"), as_string(kF32Matrix));
  HostTensor tensor = read_npy(path("k.npy"));
  EXPECT_EQ(tensor.dtype, DType::F32);
  EXPECT_EQ(tensor.shape, (Shape{2, 3}));
  const float expected[] = {1.5f, -2.0f, 0.25f, 4.0f, 5.0f, 6.0f};
  ASSERT_EQ(tensor.num_elements(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(tensor.data_as<float>()[i], expected[i]) << i;
}

TEST_F(NpyTest, WritesExactlyWhatNumpyWrites) {
  write_npy(path("f32.npy"), HostTensor::from_f32({2, 3}, {1.5f, -2.0f, 0.25f, 4.0f, 5.0f, 6.0f}));
  EXPECT_EQ(read_bytes(path("f32.npy")), as_string(kF32Matrix));

  HostTensor scalar = HostTensor::zeros(DType::I64, {});
  scalar.data_as<int64_t>()[0] = 7;
  write_npy(path("i64.npy"), scalar);
  EXPECT_EQ(read_bytes(path("i64.npy")), as_string(kI64Scalar));

  HostTensor flags = HostTensor::zeros(DType::BOOL, {3});
  flags.bytes = {std::byte{1}, std::byte{0}, std::byte{1}};
  write_npy(path("bool.npy"), flags);
  EXPECT_EQ(read_bytes(path("bool.npy")), as_string(kBoolVector));
}

TEST_F(NpyTest, ReadsNumpyFortranOrderAsRowMajor) {
  write_bytes(path("f.npy"), as_string(kI32Fortran));
  HostTensor tensor = read_npy(path("f.npy"));
  EXPECT_EQ(tensor.dtype, DType::I32);
  EXPECT_EQ(tensor.shape, (Shape{3, 2}));
  // arange(6).reshape(2, 3).T == [[0, 3], [1, 4], [2, 5]]
  const int32_t expected[] = {0, 3, 1, 4, 2, 5};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(tensor.data_as<int32_t>()[i], expected[i]) << i;
}

TEST_F(NpyTest, ReadsFortranOrderOfRank3) {
  // Column-major [2, 3, 4]: element (i, j, k) sits at i + 2 * (j + 3 * k); store its
  // row-major index (i * 3 + j) * 4 + k there, so the read must give 0, 1, 2, ...
  std::string data(24 * 4, '\0');
  for (int32_t i = 0; i < 2; ++i) {
    for (int32_t j = 0; j < 3; ++j) {
      for (int32_t k = 0; k < 4; ++k) {
        int32_t row_major_index = (i * 3 + j) * 4 + k;
        std::memcpy(&data[static_cast<size_t>(i + 2 * (j + 3 * k)) * 4], &row_major_index, 4);
      }
    }
  }
  std::string bytes = npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", 0);
  write_bytes(path("f3.npy"), bytes + data);
  HostTensor tensor = read_npy(path("f3.npy"));
  ASSERT_EQ(tensor.shape, (Shape{2, 3, 4}));
  for (int32_t index = 0; index < 24; ++index) EXPECT_EQ(tensor.data_as<int32_t>()[index], index);
}

TEST_F(NpyTest, ReadsNumpyVersion2And3Headers) {
  write_bytes(path("v2.npy"), as_string(kU32Version2));
  HostTensor v2 = read_npy(path("v2.npy"));
  EXPECT_EQ(v2.dtype, DType::U32);
  EXPECT_EQ(v2.shape, Shape{3});
  EXPECT_EQ(v2.data_as<uint32_t>()[2], 3u);

  write_bytes(path("v3.npy"), as_string(kF64Version3));
  HostTensor v3 = read_npy(path("v3.npy"));
  EXPECT_EQ(v3.dtype, DType::F64);
  EXPECT_EQ(v3.shape, Shape{2});
  EXPECT_EQ(v3.data_as<double>()[0], 0.5);
  EXPECT_EQ(v3.data_as<double>()[1], -1.0);
}

TEST_F(NpyTest, AcceptsAnyByteOrderMarkForOneByteTypes) {
  for (const char* descr : {"<u1", "|u1", ">u1", "<b1", "|b1"}) {
    write_bytes(path("o.npy"), npy_bytes(std::string("{'descr': '") + descr +
                                             "', 'fortran_order': False, 'shape': (2,)}",
                                         2));
    EXPECT_EQ(read_npy(path("o.npy")).num_bytes(), 2u) << descr;
  }
}

TEST_F(NpyTest, AcceptsKeysInAnyOrderAndDoubleQuotes) {
  write_bytes(path("o.npy"),
              npy_bytes("{ \"shape\" : ( 2 , 2 ) , 'descr':'<f2','fortran_order':False}  ", 8));
  HostTensor tensor = read_npy(path("o.npy"));
  EXPECT_EQ(tensor.dtype, DType::F16);
  EXPECT_EQ(tensor.shape, (Shape{2, 2}));
}

// ---- bad files ----------------------------------------------------------------------------

class NpyBadFileTest : public NpyTest {
 protected:
  void expect_rejected(const std::string& bytes, std::initializer_list<std::string> substrings) {
    write_bytes(path("bad.npy"), bytes);
    expect_input_error([&] { read_npy(path("bad.npy")); }, substrings);
    expect_input_error([&] { read_npy(path("bad.npy")); }, {path("bad.npy").string()});
  }
  void expect_dict_rejected(const std::string& dict, size_t data_num_bytes,
                            std::initializer_list<std::string> substrings) {
    expect_rejected(npy_bytes(dict, data_num_bytes), substrings);
  }
};

TEST_F(NpyBadFileTest, MissingFile) {
  expect_input_error([&] { read_npy(path("absent.npy")); }, {"absent.npy", "cannot read"});
}

TEST_F(NpyBadFileTest, FileShorterThanThePrefix) {
  expect_rejected("\x93NUMPY\x01", {"file is 7 bytes", "10-byte prefix"});
  expect_rejected(std::string("\x93NUMPY\x02\0\x05\0", 10), {"12-byte prefix", "version 2.0"});
}

TEST_F(NpyBadFileTest, BadMagic) {
  expect_rejected("PK\x03\x04 this is a zip archive", {"magic string", "is it a .npy file"});
}

TEST_F(NpyBadFileTest, UnsupportedVersion) {
  std::string bytes = as_string(kF32Matrix);
  bytes[6] = '\x04';
  expect_rejected(bytes, {"version 4.0", "1.0, 2.0 and 3.0"});
  bytes[6] = '\x01';
  bytes[7] = '\x01';
  expect_rejected(bytes, {"version 1.1"});
}

TEST_F(NpyBadFileTest, HeaderLengthBeyondTheFile) {
  expect_rejected(std::string("\x93NUMPY\x01\0\xff\x00{}", 12),
                  {"header length 255 bytes", "larger than the 2 bytes"});
  expect_rejected(std::string("\x93NUMPY\x02\0\xff\xff\xff\xff{}", 14),
                  {"header length 4294967295 bytes"});
}

TEST_F(NpyBadFileTest, TruncatedData) {
  std::string bytes = as_string(kF32Matrix);
  bytes.resize(bytes.size() - 4);
  expect_rejected(bytes,
                  {"data is 20 bytes", "descr '<f4' and shape (2, 3) need 24 bytes", "truncated"});
}

TEST_F(NpyBadFileTest, TrailingData) {
  expect_rejected(as_string(kF32Matrix) + "xx", {"data is 26 bytes", "need 24 bytes", "trailing"});
}

TEST_F(NpyBadFileTest, BigEndian) {
  expect_dict_rejected("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8,
                       {"'>f4' is big-endian", "expected '<f4'", "astype('<f4')"});
}

TEST_F(NpyBadFileTest, UnsupportedDescrListsSupportedOnes) {
  expect_dict_rejected(
      "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", 4,
      {"unsupported descr '<i2'", "'<f4', '<f8', '<f2', '<i4', '<i8', '<u4', '|u1', '|b1'"});
  expect_dict_rejected("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", 8,
                       {"unsupported descr '|f4'"});
}

TEST_F(NpyBadFileTest, Bfloat16AsRawBytesPointsToSafetensors) {
  expect_dict_rejected("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4,
                       {"bfloat16", "safetensors"});
}

TEST_F(NpyBadFileTest, StructuredDtype) {
  expect_dict_rejected("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
                       {"structured dtype"});
}

TEST_F(NpyBadFileTest, MissingExtraAndDuplicateKeys) {
  expect_dict_rejected("{'descr': '<f4', 'shape': (2,), }", 8, {"missing key 'fortran_order'"});
  expect_dict_rejected(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8,
      {"unexpected key 'x'", "expected exactly 'descr', 'fortran_order' and 'shape'"});
  expect_dict_rejected("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8,
                       {"duplicate key 'descr'"});
}

TEST_F(NpyBadFileTest, ShapeNotATuple) {
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8,
                       {"'shape' (2) is an integer, not a tuple", "(2,)"});
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8,
                       {"expected 'shape' to be a tuple"});
}

TEST_F(NpyBadFileTest, NegativeOrMalformedDimension) {
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", 8,
                       {"negative dimension"});
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }", 8,
                       {"expected ',' or ')' in 'shape', found 'L'"});
  expect_dict_rejected(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8,
      {"too large"});
  expect_dict_rejected(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8,
      {"overflow"});
}

TEST_F(NpyBadFileTest, FortranOrderNotABool) {
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8,
                       {"expected True or False for 'fortran_order'"});
}

TEST_F(NpyBadFileTest, MalformedDictSyntax) {
  expect_dict_rejected("'descr': '<f4'", 0, {"expected the header to start with a dict"});
  expect_dict_rejected("{'descr': '<f4", 0, {"unterminated string"});
  expect_dict_rejected("{'descr': '<f\\x34', 'fortran_order': False, 'shape': ()}", 4,
                       {"escape sequences"});
  expect_dict_rejected("{'descr' '<f4'}", 0, {"expected ':' after key 'descr'"});
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk", 4,
                       {"unexpected text after the header dict"});
  expect_dict_rejected("{'descr': '<f4', 'fortran_order': False, 'shape': ()", 4,
                       {"expected ',' or '}'", "the end of the header"});
}

}  // namespace
}  // namespace parity
