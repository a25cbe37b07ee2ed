#include "fuzz_support.h"

#include <cxxabi.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <system_error>
#include <typeinfo>

#include "parity/common/error.h"

namespace parity::fuzz {
namespace {

namespace fs = std::filesystem;

// $PARITY_FUZZ_SCRATCH (the make target gives each run its own), else a folder named after this
// process on /dev/shm (tmpfs), else in the temporary directory.
fs::path scratch_root() {
  if (const char* chosen = std::getenv("PARITY_FUZZ_SCRATCH"); chosen != nullptr && *chosen) {
    return chosen;
  }
  const std::string name = "parity-fuzz-" + std::to_string(::getpid());
  std::error_code error;
  if (fs::is_directory("/dev/shm", error)) return fs::path("/dev/shm") / name;
  return fs::temp_directory_path() / name;
}

const fs::path& input_dir() {
  static const fs::path dir = [] {
    const fs::path root = scratch_root();
    // Gone when libFuzzer exits normally (it exits through exit() at -max_total_time).
    static const fs::path cleanup_root = root;
    std::atexit([] {
      std::error_code error;
      fs::remove_all(cleanup_root, error);
    });
    return root / "in";
  }();
  return dir;
}

std::string demangled(const char* name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  const std::string result = status == 0 && readable != nullptr ? readable : name;
  std::free(readable);
  return result;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\nparity-fuzz FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace

std::vector<std::string_view> split_parts(const uint8_t* data, size_t size, size_t max_parts) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (parts.size() + 1 < max_parts) {
    const size_t at = input.find(kPartSeparator, begin);
    if (at == std::string_view::npos) break;
    parts.push_back(input.substr(begin, at - begin));
    begin = at + kPartSeparator.size();
  }
  parts.push_back(input.substr(begin));
  return parts;
}

fs::path fresh_dir() {
  const fs::path& dir = input_dir();
  std::error_code error;
  fs::remove_all(dir, error);
  fs::create_directories(dir, error);
  if (error)
    finding("cannot create the scratch directory " + dir.string() + ": " + error.message());
  return dir;
}

void write_file(const fs::path& path, std::string_view bytes) {
  const auto write = [&](const fs::path& target) {
    std::error_code error;
    fs::create_directories(target.parent_path(), error);
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    // Not a finding in the parser: the harness itself could not set the input up.
    if (!out) finding("the fuzz harness cannot write " + target.string());
  };
  write(path);
  if (const char* keep = std::getenv("PARITY_FUZZ_KEEP"); keep != nullptr && *keep) {
    write(fs::path(keep) / path.lexically_relative(input_dir()));
  }
}

bool verbose() {
  static const bool on = [] {
    const char* value = std::getenv("PARITY_FUZZ_VERBOSE");
    return value != nullptr && *value != '\0';
  }();
  return on;
}

void note_accepted() {
  if (verbose()) std::fprintf(stderr, "parity-fuzz: accepted\n");
}

void check_current_exception(const std::vector<std::string>& names) {
  try {
    throw;
  } catch (const InputError& error) {
    const std::string message = error.what();
    if (verbose()) std::fprintf(stderr, "parity-fuzz: InputError: %s\n", message.c_str());
    for (const std::string& name : names) {
      if (message.find(name) != std::string::npos) return;
    }
    std::string expected;
    for (const std::string& name : names) expected += (expected.empty() ? "" : " or ") + name;
    finding("InputError whose message does not name " + expected + ": " + message);
  } catch (const std::exception& error) {
    finding(std::string("exception other than parity::InputError escaped the reader: ") +
            demangled(typeid(error).name()) + ": " + error.what());
  } catch (...) {
    finding("an exception that is not even a std::exception escaped the reader");
  }
}

std::string deflate_bytes(std::string_view bytes, int window_bits) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    std::abort();
  }
  // deflateBound covers zlib's own framing; the slack covers gzip's larger header and trailer.
  std::string out(deflateBound(&stream, bytes.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace parity::fuzz
