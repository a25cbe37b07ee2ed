// NumPy .npy reader and writer (format versions 1.0-3.0, numpy/lib/format.py).
//
// Vocabulary:
//   file   = prefix | header | data
//   prefix = magic "\x93NUMPY" | major | minor | header length (u16 LE in 1.0; u32 LE in 2.0
//            and 3.0): 10 or 12 bytes
//   header = a Python dict literal, e.g. "{'descr': '<f4', 'fortran_order': False,
//            'shape': (2, 3), }", padded with spaces and ended by '\n' so that the data starts
//            64-byte aligned; latin-1 in 1.0/2.0, UTF-8 in 3.0
//   descr  = numpy's dtype string: byte order ('<' little, '>' big, '|' not applicable) + kind
//            letter + item size in bytes: '<f4', '|u1', '|b1'
//   data   = shape's elements, row-major (C order) or column-major when fortran_order is True
// We parse the header with a small strict parser for the literal numpy writes, not a Python
// evaluator, and read Fortran-ordered data by reordering it to row-major.
#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "parity/common/error.h"
#include "parity/common/tensor_file.h"
#include "tensor_file_util.h"

namespace parity {
namespace {

using tensor_file::BoundedReader;

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kVersionNumBytes = 2;
// numpy pads the header so that the data starts at a multiple of 64 bytes (ARRAY_ALIGN).
constexpr size_t kArrayAlignNumBytes = 64;
// numpy (1.24, which made our known answers) leaves room after the dict for the first dim to grow
// to 21 digits, so that appending along it can rewrite the header in place
// (GROWTH_AXIS_MAX_DIGITS).
constexpr size_t kGrowthAxisMaxDigits = 21;
constexpr const char* kFormat = "npy file";

struct DescrInfo {
  DType dtype;
  std::string_view descr;  // as numpy writes it
};
constexpr std::array<DescrInfo, 8> kDescrs = {{
    {DType::F32, "<f4"},
    {DType::F64, "<f8"},
    {DType::F16, "<f2"},
    {DType::I32, "<i4"},
    {DType::I64, "<i8"},
    {DType::U32, "<u4"},
    {DType::U8, "|u1"},
    {DType::BOOL, "|b1"},
}};

std::string supported_descrs() {
  std::string names;
  for (const DescrInfo& info : kDescrs)
    names += (names.empty() ? "'" : ", '") + std::string(info.descr) + "'";
  return names;
}

// ---- prefix -------------------------------------------------------------------------------

struct NpyPrefix {
  unsigned major_version = 0;
  unsigned minor_version = 0;
  size_t header_begin = 0;      // bytes before the header: 10 (1.0) or 12 (2.0, 3.0)
  size_t header_num_bytes = 0;  // as the length field says, checked to fit in the file
};

NpyPrefix read_prefix(BoundedReader& file) {
  constexpr size_t kMinPrefixNumBytes = kMagic.size() + kVersionNumBytes + 2;
  if (file.file_num_bytes() < kMinPrefixNumBytes) {
    file.fail("file is " + std::to_string(file.file_num_bytes()) + " bytes, shorter than the " +
              std::to_string(kMinPrefixNumBytes) + "-byte prefix of every .npy file");
  }
  unsigned char prefix_bytes[12] = {};
  file.read_at(0, prefix_bytes, kMinPrefixNumBytes);
  if (std::memcmp(prefix_bytes, kMagic.data(), kMagic.size()) != 0) {
    file.fail("does not start with the .npy magic string \"\\x93NUMPY\" (is it a .npy file?)");
  }
  NpyPrefix prefix;
  prefix.major_version = prefix_bytes[6];
  prefix.minor_version = prefix_bytes[7];
  size_t length_num_bytes = 0;
  if (prefix.major_version == 1 && prefix.minor_version == 0) {
    length_num_bytes = 2;
  } else if ((prefix.major_version == 2 || prefix.major_version == 3) &&
             prefix.minor_version == 0) {
    length_num_bytes = 4;
  } else {
    file.fail("unsupported .npy format version " + std::to_string(prefix.major_version) + "." +
              std::to_string(prefix.minor_version) + "; parity reads versions 1.0, 2.0 and 3.0");
  }
  prefix.header_begin = kMagic.size() + kVersionNumBytes + length_num_bytes;
  if (file.file_num_bytes() < prefix.header_begin) {
    file.fail("file is " + std::to_string(file.file_num_bytes()) + " bytes, shorter than the " +
              std::to_string(prefix.header_begin) + "-byte prefix of a version " +
              std::to_string(prefix.major_version) + ".0 .npy file");
  }
  file.read_at(8, prefix_bytes + 8, length_num_bytes);
  prefix.header_num_bytes = tensor_file::load_le(prefix_bytes + 8, length_num_bytes);
  size_t available_num_bytes = file.file_num_bytes() - prefix.header_begin;
  if (prefix.header_num_bytes > available_num_bytes) {
    file.fail("header length " + std::to_string(prefix.header_num_bytes) +
              " bytes is larger than the " + std::to_string(available_num_bytes) +
              " bytes that follow the prefix (truncated file?)");
  }
  return prefix;
}

// ---- header dict --------------------------------------------------------------------------

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// A strict parser for the dict literal numpy writes: string keys, and values that are a
// string, True/False, or a tuple of non-negative integers. Python's rules that matter here
// are kept: trailing commas are allowed, and "(3)" is an int, not a tuple.
class HeaderParser {
 public:
  HeaderParser(BoundedReader& file, std::string_view text) : file_(file), text_(text) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_fortran_order = false, seen_shape = false;
    expect('{', "the header to start with a dict");
    while (!try_consume('}')) {
      size_t key_position = position_;
      std::string key = parse_string("a dict key");
      expect(':', "':' after key '" + key + "'");
      if (key == "descr") {
        mark_seen(seen_descr, key, key_position);
        header.descr = parse_descr_value();
      } else if (key == "fortran_order") {
        mark_seen(seen_fortran_order, key, key_position);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(seen_shape, key, key_position);
        header.shape = parse_shape();
      } else {
        fail_at(key_position, "unexpected key '" + key +
                                  "'; expected exactly 'descr', 'fortran_order' and 'shape'");
      }
      if (!try_consume(',')) {
        expect('}', "',' or '}' after the value of '" + key + "'");
        break;
      }
    }
    skip_whitespace();
    if (position_ != text_.size()) fail_at(position_, "unexpected text after the header dict");
    if (!seen_descr || !seen_fortran_order || !seen_shape) {
      fail_at(position_, std::string("missing key ") +
                             (!seen_descr           ? "'descr'"
                              : !seen_fortran_order ? "'fortran_order'"
                                                    : "'shape'") +
                             "; expected exactly 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  [[noreturn]] void fail_at(size_t position, const std::string& problem) const {
    file_.fail("header dict at character " + std::to_string(position) + ": " + problem +
               " (header: " + std::string(text_.substr(0, 200)) + ")");
  }

  void skip_whitespace() {
    while (position_ < text_.size() && is_space(text_[position_])) ++position_;
  }

  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

  bool try_consume(char expected) {
    skip_whitespace();
    if (position_ < text_.size() && text_[position_] == expected) {
      ++position_;
      return true;
    }
    return false;
  }

  void expect(char expected, const std::string& what) {
    if (!try_consume(expected)) fail_at(position_, "expected " + what + ", found " + found());
  }

  std::string found() const {
    if (position_ >= text_.size()) return "the end of the header";
    return "'" + std::string(1, text_[position_]) + "'";
  }

  void mark_seen(bool& seen, const std::string& key, size_t key_position) {
    if (seen) fail_at(key_position, "duplicate key '" + key + "'");
    seen = true;
  }

  // A '...' or "..." literal without escape sequences (numpy never needs them).
  std::string parse_string(const std::string& what) {
    skip_whitespace();
    if (position_ >= text_.size() || (text_[position_] != '\'' && text_[position_] != '"')) {
      fail_at(position_, "expected " + what + " as a quoted string, found " + found());
    }
    char quote = text_[position_++];
    size_t begin = position_;
    while (position_ < text_.size() && text_[position_] != quote) {
      if (text_[position_] == '\\') fail_at(position_, "escape sequences are not supported");
      ++position_;
    }
    if (position_ >= text_.size()) fail_at(begin - 1, "unterminated string");
    return std::string(text_.substr(begin, position_++ - begin));
  }

  std::string parse_descr_value() {
    skip_whitespace();
    if (position_ < text_.size() && text_[position_] == '[') {
      fail_at(position_,
              "'descr' is a list, i.e. a structured dtype; parity reads only plain "
              "numeric arrays with descr " +
                  supported_descrs());
    }
    return parse_string("the 'descr' value");
  }

  bool parse_bool() {
    skip_whitespace();
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(position_, word.size()) == word) {
        position_ += word.size();
        return value;
      }
    }
    fail_at(position_, "expected True or False for 'fortran_order', found " + found());
  }

  int64_t parse_dim() {
    skip_whitespace();
    size_t begin = position_;
    if (position_ < text_.size() && text_[position_] == '-') {
      fail_at(position_, "negative dimension in 'shape'; expected non-negative integers");
    }
    uint64_t value = 0;
    constexpr uint64_t kMaxDim = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') {
      uint64_t digit = static_cast<uint64_t>(text_[position_] - '0');
      if (value > (kMaxDim - digit) / 10) fail_at(begin, "dimension in 'shape' is too large");
      value = value * 10 + digit;
      ++position_;
    }
    if (position_ == begin) fail_at(position_, "expected an integer dimension, found " + found());
    return static_cast<int64_t>(value);
  }

  // "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is an int in Python, so it is an error here.
  Shape parse_shape() {
    expect('(', "'shape' to be a tuple such as (2, 3)");
    Shape shape;
    bool trailing_comma = false;
    while (!try_consume(')')) {
      shape.push_back(parse_dim());
      trailing_comma = try_consume(',');
      if (!trailing_comma) {
        expect(')', "',' or ')' in 'shape'");
        break;
      }
    }
    if (shape.size() == 1 && !trailing_comma) {
      fail_at(position_, "'shape' (" + std::to_string(shape[0]) +
                             ") is an integer, not a tuple; a 1-d shape is written (" +
                             std::to_string(shape[0]) + ",)");
    }
    return shape;
  }

  BoundedReader& file_;
  std::string_view text_;
  size_t position_ = 0;
};

// ---- descr and data -----------------------------------------------------------------------

DType dtype_from_descr(BoundedReader& file, const std::string& descr) {
  for (const DescrInfo& info : kDescrs) {
    bool one_byte = info.descr[0] == '|';
    bool same_kind_and_size = descr.size() == 3 && descr.substr(1) == info.descr.substr(1);
    // Byte order means nothing for one-byte types: numpy writes '|u1', but '<u1' is valid too.
    bool any_byte_order = descr[0] == '<' || descr[0] == '>' || descr[0] == '=';
    if (descr == info.descr || (one_byte && same_kind_and_size && any_byte_order)) {
      return info.dtype;
    }
    if (same_kind_and_size && descr[0] == '>') {
      file.fail("descr '" + descr + "' is big-endian, which parity does not read; expected '" +
                std::string(info.descr) + "' (convert with arr.astype('" + std::string(info.descr) +
                "') before np.save)");
    }
  }
  if (descr == "<V2" || descr == "|V2") {
    file.fail("descr '" + descr +
              "' is raw 2-byte data, which is how numpy stores a bfloat16 "
              "(ml_dtypes) array; numpy has no bfloat16 descr, so store bfloat16 tensors as "
              "safetensors (dtype BF16) instead");
  }
  file.fail("unsupported descr '" + descr + "'; parity reads " + supported_descrs());
}

// Reorders Fortran (column-major) data to row-major. Walks the file's elements in their order,
// axis 0 fastest, keeping the row-major offset of the current index up to date.
std::vector<std::byte> fortran_to_row_major(const Shape& shape, size_t item_num_bytes,
                                            const std::vector<std::byte>& column_major) {
  size_t num_dims = shape.size();
  std::vector<size_t> row_major_strides(num_dims);  // in elements
  size_t num_elements = 1;
  for (size_t axis = num_dims; axis-- > 0;) {
    row_major_strides[axis] = num_elements;
    num_elements *= static_cast<size_t>(shape[axis]);
  }
  std::vector<std::byte> row_major(column_major.size());
  std::vector<size_t> index(num_dims, 0);
  size_t row_major_element = 0;
  for (size_t file_element = 0; file_element < num_elements; ++file_element) {
    std::memcpy(row_major.data() + row_major_element * item_num_bytes,
                column_major.data() + file_element * item_num_bytes, item_num_bytes);
    for (size_t axis = 0; axis < num_dims; ++axis) {
      ++index[axis];
      row_major_element += row_major_strides[axis];
      if (index[axis] < static_cast<size_t>(shape[axis])) break;
      row_major_element -= index[axis] * row_major_strides[axis];
      index[axis] = 0;
    }
  }
  return row_major;
}

// ---- writing ------------------------------------------------------------------------------

std::string_view descr_for(const std::filesystem::path& path, DType dtype) {
  for (const DescrInfo& info : kDescrs) {
    if (info.dtype == dtype) return info.descr;
  }
  throw InputError("cannot write npy file '" + path.string() + "': dtype " +
                   std::string(dtype_name(dtype)) +
                   " has no .npy descr because numpy has no bfloat16 type; write the tensor "
                   "with write_safetensors (BF16 is native there) or convert it to F32 first");
}

// Prefix and header exactly as numpy's np.save writes them (version 1.0 unless the header
// needs more than 65535 bytes, then 2.0).
std::string make_prefix_and_header(const HostTensor& tensor, std::string_view descr) {
  std::string dict = "{'descr': '" + std::string(descr) +
                     "', 'fortran_order': False, 'shape': " + shape_to_string(tensor.shape) + ", }";
  if (!tensor.shape.empty()) {
    size_t first_dim_digits = std::to_string(tensor.shape[0]).size();
    dict.append(kGrowthAxisMaxDigits - first_dim_digits, ' ');
  }
  for (size_t length_num_bytes : {size_t{2}, size_t{4}}) {
    size_t prefix_num_bytes = kMagic.size() + kVersionNumBytes + length_num_bytes;
    size_t unpadded_num_bytes = dict.size() + 1;  // + the final '\n'
    // Like numpy, pads by 1..64 spaces (a full 64 when already aligned).
    size_t pad_num_bytes =
        kArrayAlignNumBytes - (prefix_num_bytes + unpadded_num_bytes) % kArrayAlignNumBytes;
    size_t header_num_bytes = unpadded_num_bytes + pad_num_bytes;
    if (length_num_bytes == 2 && header_num_bytes > 0xffff) continue;
    std::string out(kMagic);
    out.push_back(static_cast<char>(length_num_bytes == 2 ? 1 : 2));
    out.push_back('\0');
    tensor_file::append_le(header_num_bytes, length_num_bytes, out);
    out += dict;
    out.append(pad_num_bytes, ' ');
    out.push_back('\n');
    return out;
  }
  throw InternalError("npy header does not fit a 4-byte length");
}

HostTensor read_npy_from(BoundedReader& file) {
  NpyPrefix prefix = read_prefix(file);
  std::string header_text(prefix.header_num_bytes, '\0');
  file.read_at(prefix.header_begin, header_text.data(), header_text.size());
  NpyHeader header = HeaderParser(file, header_text).parse();

  HostTensor tensor;
  tensor.dtype = dtype_from_descr(file, header.descr);
  tensor.shape = header.shape;
  std::optional<size_t> expected_num_bytes =
      tensor_file::checked_tensor_num_bytes(tensor.shape, tensor.dtype);
  std::string described = "descr '" + header.descr + "' and shape " + shape_to_string(tensor.shape);
  if (!expected_num_bytes) file.fail(described + " overflow the size of a tensor");
  size_t data_begin = prefix.header_begin + prefix.header_num_bytes;
  size_t actual_num_bytes = file.file_num_bytes() - data_begin;
  if (actual_num_bytes != *expected_num_bytes) {
    file.fail("data is " + std::to_string(actual_num_bytes) + " bytes, but " + described +
              " need " + std::to_string(*expected_num_bytes) + " bytes" +
              (actual_num_bytes < *expected_num_bytes ? " (truncated file?)"
                                                      : " (unexpected trailing bytes)"));
  }
  tensor.bytes.resize(actual_num_bytes);
  file.read_at(data_begin, tensor.bytes.data(), actual_num_bytes);
  if (header.fortran_order) {
    tensor.bytes = fortran_to_row_major(tensor.shape, dtype_num_bytes(tensor.dtype), tensor.bytes);
  }
  return tensor;
}

}  // namespace

HostTensor read_npy(const std::filesystem::path& path) {
  BoundedReader file(path, kFormat);
  return read_npy_from(file);
}

HostTensor parse_npy(std::string_view bytes, const std::string& origin) {
  BoundedReader file(origin, kFormat, bytes);
  return read_npy_from(file);
}

void write_npy(const std::filesystem::path& path, const HostTensor& tensor) {
  std::string_view descr = descr_for(path, tensor.dtype);
  if (tensor.bytes.size() != tensor.num_bytes()) {
    throw InternalError("write_npy: tensor holds " + std::to_string(tensor.bytes.size()) +
                        " bytes but its dtype and shape " + shape_to_string(tensor.shape) +
                        " need " + std::to_string(tensor.num_bytes()));
  }
  std::string prefix_and_header = make_prefix_and_header(tensor, descr);
  tensor_file::write_file_atomically(path, kFormat, [&](std::ostream& out) {
    out.write(prefix_and_header.data(), static_cast<std::streamsize>(prefix_and_header.size()));
    out.write(reinterpret_cast<const char*>(tensor.bytes.data()),
              static_cast<std::streamsize>(tensor.bytes.size()));
  });
}

}  // namespace parity
