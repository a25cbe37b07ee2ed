// What every fuzz target shares. parity's readers take a path, so each target writes libFuzzer's
// input to a file (or a few files) in a scratch directory on tmpfs and calls the real public
// reader on it. The contract under test (issue 7): bad input is refused with a parity::InputError
// whose message names the file; any other exception, a message that does not name the file, a
// sanitizer report, a timeout or a huge allocation is a finding.
//
// Keeping a finding as a regression input: run the target on the crashing input with
// PARITY_FUZZ_KEEP=DIR set; every file the target writes is also copied under DIR with the same
// relative name, which is exactly what the reader saw (tests/data/fuzz/<parser>/, README
// "Fuzzing"). With PARITY_FUZZ_VERBOSE set, each input's outcome (accepted, or the InputError's
// message) goes to stderr: `fuzz_npy corpus/npy/*` shows which seeds the reader accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace parity::fuzz {

// Separates the parts of an input for targets that write more than one file or record. Long
// enough that random bytes never form it; every multi-part target's dictionary lists it.
inline constexpr std::string_view kPartSeparator = "|parity-fuzz-part|";

// The input cut at each separator into at most `max_parts` parts (the last part keeps any
// further separators).
std::vector<std::string_view> split_parts(const uint8_t* data, size_t size, size_t max_parts);

// An empty directory for this input (the previous input's files are removed first), on /dev/shm
// when there is one so that the many small writes never touch a disk.
std::filesystem::path fresh_dir();

// Writes `bytes` to `path` (inside fresh_dir()), creating parent directories; copies it under
// $PARITY_FUZZ_KEEP too when that is set.
void write_file(const std::filesystem::path& path, std::string_view bytes);

// `bytes` deflated at Z_BEST_SPEED with zlib's `window_bits`: 15 + 16 for a gzip stream
// (header and trailer), -15 for raw deflate as zip's method 8 stores it.
std::string deflate_bytes(std::string_view bytes, int window_bits);

// Runs `read` (a call of the reader under test). Returns normally when it succeeds or throws an
// InputError whose message contains one of `names` (the file's or directory's path); prints the
// problem and aborts otherwise, so that libFuzzer records the input as a crash.
template <typename Read>
void expect_success_or_input_error(Read&& read, const std::vector<std::string>& names);

// Implementation details of the template: classifies the exception in flight; says that the
// reader accepted the input when PARITY_FUZZ_VERBOSE is set (for checking the seeds).
void check_current_exception(const std::vector<std::string>& names);
void note_accepted();

template <typename Read>
void expect_success_or_input_error(Read&& read, const std::vector<std::string>& names) {
  try {
    read();
  } catch (...) {
    check_current_exception(names);
    return;
  }
  note_accepted();
}

}  // namespace parity::fuzz
