// Fashion-MNIST: the real files of Debian's dataset-fashion-mnist (counts, labels and pixels
// checked against values read independently with Python), and every kind of bad file, written
// as real small .gz files with zlib.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "parity/common/dataset.h"
#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::write_bytes;

// ---------------------------------------------------------------------------------------------
// The real data. Golden values read with the system Python (3.11.2), independently of zlib's C
// API and of this loader:
//   import gzip, struct, collections
//   d = gzip.open('train-labels-idx1-ubyte.gz').read()
//   struct.unpack('>II', d[:8])             # (2049, 60000)
//   list(d[8:18])                           # [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
//   collections.Counter(d[8:])              # 6000 of each class 0..9
//   d = gzip.open('train-images-idx3-ubyte.gz').read()
//   struct.unpack('>IIII', d[:16])          # (2051, 60000, 28, 28)
//   px = d[16:]; [(i, px[i]) for i in range(784) if px[i]][:5]
//                                           # [(96, 1), (99, 13), (100, 73), (103, 1), (104, 4)]
//   sum(px[:784])                           # 76247
//   [px[784*59999 + i] for i in (300, 400, 500)], sum(px[784*59999:])   # [19, 129, 180] 16684
//   (t10k) labels[:10] = [9, 2, 1, 1, 6, 1, 4, 6, 5, 7], 1000 per class; sum(image 0) = 33456

double pixel_sum(const Dataset& data, int64_t sample) {
  double sum = 0;
  for (int64_t i = 0; i < 784; ++i) sum += data.features[static_cast<size_t>(sample * 784 + i)];
  return sum;
}

TEST(FashionMnist, TrainSplitMatchesIndependentRead) {
  const auto start = std::chrono::steady_clock::now();
  const Dataset train = load_fashion_mnist("train");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ info ] load_fashion_mnist(\"train\") took " << seconds << " s\n";
  RecordProperty("load_seconds", std::to_string(seconds));

  EXPECT_EQ(train.name, "fashion-mnist/train");
  ASSERT_EQ(train.num_samples, 60000);
  EXPECT_EQ(train.feature_dim, 784);
  EXPECT_EQ(train.num_classes, 10);
  ASSERT_EQ(train.features.size(), 60000u * 784u);
  ASSERT_EQ(train.labels.size(), 60000u);
  EXPECT_TRUE(train.targets.empty());
  EXPECT_EQ(train.target_dim, 0);

  EXPECT_EQ(std::vector<int64_t>(train.labels.begin(), train.labels.begin() + 10),
            (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  // Pixels are pixel / 255.0f exactly (torchvision's ToTensor).
  EXPECT_EQ(train.features[95], 0.0f);
  EXPECT_EQ(train.features[96], 1.0f / 255.0f);
  EXPECT_EQ(train.features[99], 13.0f / 255.0f);
  EXPECT_EQ(train.features[100], 73.0f / 255.0f);
  EXPECT_EQ(train.features[104], 4.0f / 255.0f);
  EXPECT_NEAR(pixel_sum(train, 0), 76247.0 / 255.0, 1e-3);
  const size_t last = 784u * 59999u;
  EXPECT_EQ(train.features[last + 300], 19.0f / 255.0f);
  EXPECT_EQ(train.features[last + 400], 129.0f / 255.0f);
  EXPECT_EQ(train.features[last + 500], 180.0f / 255.0f);
  EXPECT_NEAR(pixel_sum(train, 59999), 16684.0 / 255.0, 1e-3);
}

// Fashion-MNIST is balanced by construction: 6000 training and 1000 test images per class
// (Xiao et al. 2017, "Fashion-MNIST", Table 1 and the dataset README).
TEST(FashionMnist, ClassesAreBalanced) {
  for (const auto& [split, per_class] : {std::pair{"train", 6000}, std::pair{"test", 1000}}) {
    const Dataset data = load_fashion_mnist(split);
    std::array<int, 10> histogram{};
    for (int64_t label : data.labels) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++histogram[static_cast<size_t>(label)];
    }
    for (int count : histogram) EXPECT_EQ(count, per_class) << split;
  }
}

TEST(FashionMnist, TestSplitMatchesIndependentRead) {
  const Dataset test = load_fashion_mnist("test");
  EXPECT_EQ(test.name, "fashion-mnist/test");
  ASSERT_EQ(test.num_samples, 10000);
  EXPECT_EQ(std::vector<int64_t>(test.labels.begin(), test.labels.begin() + 10),
            (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_NEAR(pixel_sum(test, 0), 33456.0 / 255.0, 1e-3);
  for (float value : test.features) {
    ASSERT_GE(value, 0.0f);
    ASSERT_LE(value, 1.0f);
  }
}

TEST(FashionMnist, UnknownSplitIsRefused) {
  try {
    load_fashion_mnist("validation");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "Fashion-MNIST: unknown split 'validation'; expected 'train' or 'test'");
  }
}

// ---------------------------------------------------------------------------------------------
// Bad files

void put_be32(std::vector<unsigned char>& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    bytes.push_back(static_cast<unsigned char>((value >> shift) & 0xffu));
  }
}

// An IDX file: magic, dims, then `num_data_bytes` bytes of value `fill`.
std::vector<unsigned char> idx_file(uint32_t magic, const std::vector<uint32_t>& dims,
                                    size_t num_data_bytes, unsigned char fill = 1) {
  std::vector<unsigned char> bytes;
  put_be32(bytes, magic);
  for (uint32_t dim : dims) put_be32(bytes, dim);
  bytes.insert(bytes.end(), num_data_bytes, fill);
  return bytes;
}

// A temp folder that mimics /usr/share/datasets/fashion-mnist, filled by each test.
class FashionMnistFiles : public ::testing::Test {
 protected:
  std::string path(const char* name) const { return dir_.path(name).string(); }

  void write_gz(const char* name, const std::vector<unsigned char>& bytes) const {
    gzFile file = gzopen(path(name).c_str(), "wb");
    ASSERT_NE(file, nullptr);
    if (!bytes.empty()) {
      ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    ASSERT_EQ(gzclose(file), Z_OK);
  }

  // Well-formed images and labels of `count` samples for the train split.
  void write_train(uint32_t num_images, uint32_t num_labels) const {
    write_gz("train-images-idx3-ubyte.gz", idx_file(0x803, {num_images, 28, 28}, num_images * 784));
    write_gz("train-labels-idx1-ubyte.gz", idx_file(0x801, {num_labels}, num_labels));
  }

  std::string load_error() const {
    try {
      load_fashion_mnist_from(dir_.path(), "train");
    } catch (const InputError& error) {
      return error.what();
    }
    return "";
  }

  testing::TempDir dir_;
};

TEST_F(FashionMnistFiles, MissingFileNamesThePackage) {
  EXPECT_EQ(load_error(),
            "Fashion-MNIST file " + path("train-images-idx3-ubyte.gz") +
                ": not found; install the Debian package dataset-fashion-mnist "
                "(scripts/install-deps.sh) or set PARITY_DATA_DIR to a folder holding the four "
                "IDX .gz files");
}

TEST_F(FashionMnistFiles, DataDirComesFromEnvironment) {
  const char* old_value = std::getenv("PARITY_DATA_DIR");
  const std::string saved = old_value != nullptr ? old_value : "";
  {
    ::setenv("PARITY_DATA_DIR", dir_.path().c_str(), 1);
    struct Restore {  // so that a failing assertion cannot leak the variable
      const char* old_value;
      std::string saved;
      ~Restore() {
        if (old_value != nullptr) {
          ::setenv("PARITY_DATA_DIR", saved.c_str(), 1);
        } else {
          ::unsetenv("PARITY_DATA_DIR");
        }
      }
    } restore{old_value, saved};
    EXPECT_EQ(fashion_mnist_dir(), dir_.path());
    std::string message;
    try {
      load_fashion_mnist("test");
    } catch (const InputError& error) {
      message = error.what();
    }
    EXPECT_NE(message.find(path("t10k-images-idx3-ubyte.gz") + ": not found"), std::string::npos)
        << message;
  }
  if (old_value == nullptr) {
    EXPECT_EQ(fashion_mnist_dir(), fs::path("/usr/share/datasets/fashion-mnist"));
  }
}

TEST_F(FashionMnistFiles, WrongMagic) {
  write_train(2, 2);
  write_gz("train-images-idx3-ubyte.gz", idx_file(0x802, {2, 28, 28}, 2 * 784));
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-images-idx3-ubyte.gz") +
                              ": bad IDX magic number: expected 0x00000803 (unsigned bytes, 3 "
                              "dimensions), found 0x00000802");
}

TEST_F(FashionMnistFiles, LabelsFileWithImagesMagic) {
  write_train(2, 2);
  write_gz("train-labels-idx1-ubyte.gz", idx_file(0x803, {2, 28, 28}, 2 * 784));
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-labels-idx1-ubyte.gz") +
                              ": bad IDX magic number: expected 0x00000801 (unsigned bytes, 1 "
                              "dimensions), found 0x00000803");
}

TEST_F(FashionMnistFiles, EmptyFile) {
  write_train(2, 2);
  write_gz("train-labels-idx1-ubyte.gz", {});
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-labels-idx1-ubyte.gz") +
                              ": bad IDX magic number: expected 0x00000801 (unsigned bytes, 1 "
                              "dimensions), found a file of 0 bytes");
}

TEST_F(FashionMnistFiles, TruncatedHeader) {
  write_train(2, 2);
  write_gz("train-images-idx3-ubyte.gz", idx_file(0x803, {2, 28}, 0));
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-images-idx3-ubyte.gz") +
                              ": IDX header truncated: expected 16 header bytes, found 12");
}

TEST_F(FashionMnistFiles, TruncatedData) {
  write_train(2, 2);
  write_gz("train-images-idx3-ubyte.gz", idx_file(0x803, {2, 28, 28}, 1000));
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-images-idx3-ubyte.gz") +
                              ": expected 1568 data bytes after the header (from its dimensions), "
                              "found 1000 (truncated)");
}

TEST_F(FashionMnistFiles, ExtraBytes) {
  write_train(2, 2);
  write_gz("train-labels-idx1-ubyte.gz", idx_file(0x801, {2}, 3));
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-labels-idx1-ubyte.gz") +
                              ": expected 2 data bytes after the header (from its dimensions), "
                              "found 3 (extra bytes)");
}

TEST_F(FashionMnistFiles, TruncatedGzipStream) {
  write_train(2, 2);
  // Cut a valid .gz in the middle of its deflate stream.
  const std::string file = path("train-images-idx3-ubyte.gz");
  fs::resize_file(file, fs::file_size(file) / 2);
  const std::string message = load_error();
  EXPECT_EQ(message.rfind("Fashion-MNIST file " + file + ": corrupt or truncated gzip data: ", 0),
            0u)
      << message;
}

TEST_F(FashionMnistFiles, NotGzip) {
  write_train(2, 2);
  write_bytes(path("train-labels-idx1-ubyte.gz"), "this is not a gzip file\n");
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-labels-idx1-ubyte.gz") +
                              ": is not gzip-compressed (expected an IDX file inside a .gz)");
}

TEST_F(FashionMnistFiles, CorruptGzipBody) {
  write_train(2, 2);
  // A gzip header (magic 1f 8b, deflate, no flags) followed by bytes that are not deflate data.
  write_bytes(path("train-labels-idx1-ubyte.gz"),
              std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10) + "\xff\xff\xff garbage");
  const std::string message = load_error();
  EXPECT_EQ(message.rfind("Fashion-MNIST file " + path("train-labels-idx1-ubyte.gz") +
                              ": corrupt or truncated gzip data: ", 0),
            0u)
      << message;
}

TEST_F(FashionMnistFiles, WrongImageDims) {
  write_train(2, 2);
  write_gz("train-images-idx3-ubyte.gz", idx_file(0x803, {2, 32, 32}, 2 * 1024));
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-images-idx3-ubyte.gz") +
                              ": expected 28x28 images, found 32x32");
}

TEST_F(FashionMnistFiles, ImageAndLabelCountsDiffer) {
  write_train(2, 3);
  EXPECT_EQ(load_error(), "Fashion-MNIST: " + path("train-images-idx3-ubyte.gz") +
                              " holds 2 images but " + path("train-labels-idx1-ubyte.gz") +
                              " holds 3 labels; the two files must describe the same samples");
}

TEST_F(FashionMnistFiles, LabelOutOfRange) {
  write_train(2, 2);
  std::vector<unsigned char> labels = idx_file(0x801, {2}, 2, 3);
  labels.back() = 10;
  write_gz("train-labels-idx1-ubyte.gz", labels);
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-labels-idx1-ubyte.gz") +
                              ": label 10 at index 1 is outside [0, 9]");
}

TEST_F(FashionMnistFiles, WellFormedButNotTheSplitSize) {
  write_train(2, 2);
  EXPECT_EQ(load_error(), "Fashion-MNIST file " + path("train-images-idx3-ubyte.gz") +
                              ": expected 60000 samples, found 2");
}

}  // namespace
}  // namespace parity
