// Fashion-MNIST from the IDX files of Debian's dataset-fashion-mnist package.
//
// IDX format (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS FOR THE MNIST DATABASE"):
//   magic   4 bytes, big-endian: 0x00 0x00 <type> <num_dims>; type 0x08 = unsigned byte.
//           Images are 0x00000803 (ubyte, 3 dims), labels 0x00000801 (ubyte, 1 dim).
//   dims    num_dims big-endian u32: images [count, rows, cols], labels [count].
//   data    count * rows * cols bytes (images, row-major pixels 0..255) or count bytes (labels).
// The files are gzip-compressed; we inflate each one whole into memory (47 MB for the training
// images) and convert in a single pass. Measured on the 2-core development container: 0.57 s
// for the training split (zcat alone takes about 0.3 s of CPU for the images file), 0.14 s for
// the test split.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "parity/common/dataset.h"
#include "parity/common/error.h"

namespace parity {

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr uint32_t kImageRows = 28;
constexpr uint32_t kImageCols = 28;
constexpr int64_t kNumClasses = 10;
constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";

struct SplitFiles {
  std::filesystem::path images;
  std::filesystem::path labels;
  uint32_t expected_count;
};

SplitFiles split_files(const std::filesystem::path& dir, const std::string& split) {
  // File prefixes follow the original distribution: "train" and "t10k" (the test split).
  if (split == "train") {
    return {dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 60000};
  }
  if (split == "test") {
    return {dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz", 10000};
  }
  throw InputError("Fashion-MNIST: unknown split '" + split + "'; expected 'train' or 'test'");
}

std::string hex32(uint32_t value) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << value;
  return out.str();
}

[[noreturn]] void fail_file(const std::filesystem::path& path, const std::string& what) {
  throw InputError("Fashion-MNIST file " + path.string() + ": " + what);
}

// Inflates a whole .gz file. zlib's gzread reads non-gzip files "transparently" (copies the
// bytes), so we ask gzdirect() and refuse them: an uncompressed or garbage file is not what the
// package installs. A truncated stream shows up as Z_BUF_ERROR after the last read.
std::vector<unsigned char> read_gzip_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    fail_file(path,
              "not found; install the Debian package dataset-fashion-mnist "
              "(scripts/install-deps.sh) or set PARITY_DATA_DIR to a folder holding the four "
              "IDX .gz files");
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) fail_file(path, "cannot be opened for reading");
  gzbuffer(file, 1u << 20);

  std::vector<unsigned char> bytes;
  // Reads of 64 KiB, doubling up to 8 MiB: the 47 MB training images still take few reads, and
  // a small file (the labels, a damaged or hand-made file) is not given 8 MiB of zeroed buffer
  // per read (which held the fuzzer to 70 inputs a second).
  constexpr size_t kMaxChunkBytes = size_t{8} << 20;
  size_t chunk_bytes = size_t{64} << 10;
  std::string error;
  for (;; chunk_bytes = std::min(2 * chunk_bytes, kMaxChunkBytes)) {
    const size_t old_num_bytes = bytes.size();
    bytes.resize(old_num_bytes + chunk_bytes);
    const int num_read =
        gzread(file, bytes.data() + old_num_bytes, static_cast<unsigned>(chunk_bytes));
    if (num_read < 0) {
      int code = 0;
      error = gzerror(file, &code);
      bytes.resize(old_num_bytes);
      break;
    }
    bytes.resize(old_num_bytes + static_cast<size_t>(num_read));
    if (num_read == 0) break;
  }
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  if (error.empty() && code != Z_OK) error = message;
  const bool not_gzip = gzdirect(file) != 0;
  gzclose(file);

  if (not_gzip) fail_file(path, "is not gzip-compressed (expected an IDX file inside a .gz)");
  if (!error.empty()) fail_file(path, "corrupt or truncated gzip data: " + error);
  return bytes;
}

uint32_t read_be32(const unsigned char* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
         uint32_t{bytes[3]};
}

struct IdxView {
  std::vector<uint32_t> dims;
  const unsigned char* data = nullptr;
  size_t num_data_bytes = 0;
};

// Checks magic and exact length: header + product(dims) bytes, nothing more, nothing less.
IdxView parse_idx(const std::filesystem::path& path, const std::vector<unsigned char>& bytes,
                  uint32_t expected_magic) {
  const size_t num_dims = expected_magic & 0xffu;
  const size_t num_header_bytes = 4 + 4 * num_dims;
  if (bytes.size() < 4 || read_be32(bytes.data()) != expected_magic) {
    const std::string found = bytes.size() < 4 ? "a file of " + std::to_string(bytes.size()) +
                                                     " bytes"
                                               : hex32(read_be32(bytes.data()));
    fail_file(path, "bad IDX magic number: expected " + hex32(expected_magic) +
                        " (unsigned bytes, " + std::to_string(num_dims) +
                        " dimensions), found " + found);
  }
  if (bytes.size() < num_header_bytes) {
    fail_file(path, "IDX header truncated: expected " + std::to_string(num_header_bytes) +
                        " header bytes, found " + std::to_string(bytes.size()));
  }
  IdxView view;
  size_t num_data_bytes = 1;
  for (size_t d = 0; d < num_dims; ++d) {
    view.dims.push_back(read_be32(bytes.data() + 4 + 4 * d));
    num_data_bytes *= view.dims.back();
  }
  const size_t found_data_bytes = bytes.size() - num_header_bytes;
  if (found_data_bytes != num_data_bytes) {
    fail_file(path, "expected " + std::to_string(num_data_bytes) +
                        " data bytes after the header (from its dimensions), found " +
                        std::to_string(found_data_bytes) +
                        (found_data_bytes < num_data_bytes ? " (truncated)" : " (extra bytes)"));
  }
  view.data = bytes.data() + num_header_bytes;
  view.num_data_bytes = num_data_bytes;
  return view;
}

void check_image_dims(const std::filesystem::path& path, const IdxView& images) {
  if (images.dims[1] != kImageRows || images.dims[2] != kImageCols) {
    fail_file(path, "expected " + std::to_string(kImageRows) + "x" + std::to_string(kImageCols) +
                        " images, found " + std::to_string(images.dims[1]) + "x" +
                        std::to_string(images.dims[2]));
  }
}

void check_counts_agree(const SplitFiles& files, uint32_t num_images, uint32_t num_labels) {
  if (num_images != num_labels) {
    throw InputError("Fashion-MNIST: " + files.images.string() + " holds " +
                     std::to_string(num_images) + " images but " + files.labels.string() +
                     " holds " + std::to_string(num_labels) +
                     " labels; the two files must describe the same samples");
  }
}

// Last: the files are well-formed, but are they the split we asked for?
void check_expected_count(const SplitFiles& files, uint32_t num_images) {
  if (num_images != files.expected_count) {
    fail_file(files.images, "expected " + std::to_string(files.expected_count) +
                                " samples, found " + std::to_string(num_images));
  }
}

std::vector<float> convert_pixels(const IdxView& images) {
  // pixel / 255.0f exactly as torchvision's ToTensor computes it; a 256-entry table makes the
  // single conversion pass cheap.
  std::array<float, 256> scaled;
  for (int p = 0; p < 256; ++p) scaled[static_cast<size_t>(p)] = static_cast<float>(p) / 255.0f;
  std::vector<float> features(images.num_data_bytes);
  for (size_t i = 0; i < images.num_data_bytes; ++i) features[i] = scaled[images.data[i]];
  return features;
}

std::vector<int64_t> convert_labels(const std::filesystem::path& path, const IdxView& labels) {
  std::vector<int64_t> values(labels.num_data_bytes);
  for (size_t i = 0; i < labels.num_data_bytes; ++i) {
    if (labels.data[i] >= kNumClasses) {
      fail_file(path, "label " + std::to_string(labels.data[i]) + " at index " +
                          std::to_string(i) + " is outside [0, " +
                          std::to_string(kNumClasses - 1) + "]");
    }
    values[i] = labels.data[i];
  }
  return values;
}

}  // namespace

std::filesystem::path fashion_mnist_dir() {
  const char* from_env = std::getenv("PARITY_DATA_DIR");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  return kDefaultDir;
}

Dataset load_fashion_mnist(const std::string& split) {
  return load_fashion_mnist_from(fashion_mnist_dir(), split);
}

Dataset load_fashion_mnist_from(const std::filesystem::path& dir, const std::string& split) {
  const SplitFiles files = split_files(dir, split);
  const std::vector<unsigned char> image_bytes = read_gzip_file(files.images);
  const std::vector<unsigned char> label_bytes = read_gzip_file(files.labels);
  const IdxView images = parse_idx(files.images, image_bytes, kImagesMagic);
  const IdxView labels = parse_idx(files.labels, label_bytes, kLabelsMagic);
  check_image_dims(files.images, images);
  check_counts_agree(files, images.dims[0], labels.dims[0]);

  Dataset dataset;
  dataset.name = "fashion-mnist/" + split;
  dataset.num_samples = images.dims[0];
  dataset.num_classes = kNumClasses;
  dataset.labels = convert_labels(files.labels, labels);
  check_expected_count(files, images.dims[0]);
  dataset.feature_dim = int64_t{kImageRows} * kImageCols;
  dataset.features = convert_pixels(images);
  return dataset;
}

}  // namespace parity
