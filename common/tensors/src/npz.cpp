// NumPy .npz reader. An .npz is a zip archive whose members are .npy files (numpy/lib/npyio.py:
// np.savez stores them, np.savez_compressed deflates them; np.load's NpzFile names each array
// by its member name without ".npy"). libzip reads the archive and checks every member's
// CRC-32 as it is read; each member is then parsed by the .npy reader (npy.cpp) from memory.
#include <zip.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "parity/common/error.h"
#include "parity/common/tensor_file.h"

namespace parity {
namespace {

constexpr std::string_view kNpySuffix = ".npy";
// Deflate cannot expand data by more than about 1032:1 (RFC 1951: a 258-byte match costs at
// least 2 bits), so a member that claims more is damaged or hostile; refusing it up front keeps
// a 1 KB archive from asking for gigabytes.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kDeflateSlackNumBytes = 1024;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw InputError("npz file '" + path.string() + "': " + problem);
}

std::string zip_error_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

struct ArchiveCloser {
  void operator()(zip_t* archive) const { zip_discard(archive); }
};
struct MemberCloser {
  void operator()(zip_file_t* member) const { zip_fclose(member); }
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;
using Member = std::unique_ptr<zip_file_t, MemberCloser>;

Archive open_archive(const std::filesystem::path& path) {
  int code = 0;
  // ZIP_CHECKCONS: also compare the central directory with the local headers, so a damaged
  // archive is refused here rather than half read.
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (archive == nullptr) {
    std::string hint = code == ZIP_ER_NOZIP
                           ? " (an .npz is the zip archive np.savez writes; is this an .npy or "
                             "another kind of file?)"
                           : "";
    fail(path, "cannot open it as a zip archive: " + zip_error_text(code) + hint);
  }
  return Archive(archive);
}

// The member's bytes, after checking that its method and sizes are ones an .npz can have.
std::string read_member(const std::filesystem::path& path, zip_t* archive, zip_uint64_t index,
                        const zip_stat_t& stat) {
  auto fail_member = [&](const std::string& problem) {
    fail(path, "member " + std::to_string(index) + " '" + stat.name + "': " + problem);
  };
  if (stat.encryption_method != ZIP_EM_NONE) {
    fail_member("is encrypted; numpy never encrypts .npz members");
  }
  if (stat.comp_method == ZIP_CM_STORE) {
    if (stat.size != stat.comp_size) {
      fail_member("is stored (not compressed) yet says " + std::to_string(stat.size) +
                  " bytes uncompressed and " + std::to_string(stat.comp_size) +
                  " compressed; the archive is damaged");
    }
  } else if (stat.comp_method == ZIP_CM_DEFLATE) {
    if (stat.size > stat.comp_size * kMaxDeflateRatio + kDeflateSlackNumBytes) {
      fail_member("says " + std::to_string(stat.size) + " bytes uncompressed from " +
                  std::to_string(stat.comp_size) +
                  " compressed, more than deflate can expand; the archive is damaged");
    }
  } else {
    fail_member("uses zip compression method " + std::to_string(stat.comp_method) +
                "; parity reads stored and deflated members (np.savez, np.savez_compressed)");
  }
  Member member(zip_fopen_index(archive, index, 0));
  if (!member) fail_member(std::string("cannot open it: ") + zip_strerror(archive));
  std::string bytes(static_cast<size_t>(stat.size), '\0');
  size_t filled = 0;
  while (filled < bytes.size()) {
    zip_int64_t got = zip_fread(member.get(), bytes.data() + filled, bytes.size() - filled);
    if (got < 0) {
      fail_member("damaged after " + std::to_string(filled) + " of its " +
                  std::to_string(bytes.size()) + " bytes: " + zip_file_strerror(member.get()));
    }
    if (got == 0) {
      fail_member("ends after " + std::to_string(filled) + " bytes, but the archive says " +
                  std::to_string(bytes.size()) + " (truncated or damaged archive)");
    }
    filled += static_cast<size_t>(got);
  }
  // One more read lets libzip reach the member's end, where it compares the CRC-32.
  char extra = 0;
  zip_int64_t trailing = zip_fread(member.get(), &extra, 1);
  if (trailing < 0) fail_member(std::string("damaged: ") + zip_file_strerror(member.get()));
  if (trailing > 0) {
    fail_member("holds more than the " + std::to_string(bytes.size()) +
                " bytes the archive says; the archive is damaged");
  }
  return bytes;
}

}  // namespace

NamedTensors read_npz(const std::filesystem::path& path) {
  Archive archive = open_archive(path);
  zip_int64_t num_members = zip_get_num_entries(archive.get(), 0);
  if (num_members < 0)
    fail(path, std::string("cannot list its members: ") + zip_strerror(archive.get()));
  NamedTensors tensors;
  for (zip_uint64_t index = 0; index < static_cast<zip_uint64_t>(num_members); ++index) {
    zip_stat_t stat;
    zip_stat_init(&stat);
    if (zip_stat_index(archive.get(), index, 0, &stat) != 0) {
      fail(path, "member " + std::to_string(index) + ": " + zip_strerror(archive.get()));
    }
    std::string name = stat.name != nullptr ? stat.name : "";
    constexpr zip_uint64_t kNeeded = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE |
                                     ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    if ((stat.valid & kNeeded) != kNeeded) {
      fail(path, "member " + std::to_string(index) + " '" + name +
                     "': the archive does not say its name, sizes and compression");
    }
    bool is_npy = name.size() > kNpySuffix.size() &&
                  name.compare(name.size() - kNpySuffix.size(), kNpySuffix.size(), kNpySuffix) == 0;
    if (!is_npy) {
      fail(path, "member " + std::to_string(index) + " '" + name +
                     "' is not an .npy file; an .npz holds only NAME.npy members, as np.savez "
                     "writes them (was the archive made by another tool?)");
    }
    std::string array_name = name.substr(0, name.size() - kNpySuffix.size());
    if (tensors.count(array_name) != 0) {
      fail(path, "member " + std::to_string(index) + " '" + name +
                     "' appears twice; np.load would keep only one of them, so parity refuses "
                     "the archive");
    }
    std::string bytes = read_member(path, archive.get(), index, stat);
    tensors.emplace(array_name, parse_npy(bytes, "'" + path.string() + "' member '" + name + "'"));
  }
  return tensors;
}

}  // namespace parity
