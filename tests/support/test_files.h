// Files for tests: a temporary directory per test, whole-file reads and writes, and a check that
// a call fails with an InputError saying the right things.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <system_error>
#include <utility>

#include "command.h"
#include "parity/common/error.h"

namespace parity::testing {

// A fresh, empty directory for the running test, removed (with all it holds) on destruction.
// Its name holds the process id and the test's full name, so tests and processes running at the
// same time never share one. Construct it while a test runs (in the test body or as a member of
// its fixture).
class TempDir {
 public:
  TempDir() : path_(fresh_directory(unique_name())) {}
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path path(const std::string& name) const { return path_ / name; }

 private:
  // "<pid>-<suite>.<test>", with every character but letters, digits, '.', '-' and '_' made '_'
  // (parameterized tests have '/' in their names).
  static std::string unique_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::to_string(::getpid()) + "-";
    name += info != nullptr ? std::string(info->test_suite_name()) + "." + info->name()
                            : std::string("no-test");
    for (char& c : name) {
      const bool safe =
          std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
      if (!safe) c = '_';
    }
    return name;
  }

  std::filesystem::path path_;
};

// Replaces the file at `path` with exactly `bytes`.
inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The whole file at `path` ("" when it cannot be read).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `fn` and expects it to throw parity::InputError whose message contains every one of
// `substrings`; a failure prints the message and what it lacks.
template <typename Fn>
void expect_input_error(Fn&& fn, std::initializer_list<std::string> substrings) {
  try {
    std::forward<Fn>(fn)();
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (const std::string& substring : substrings) {
      EXPECT_NE(message.find(substring), std::string::npos)
          << "message: " << message << "\nlacks: " << substring;
    }
    return;
  }
  std::string expected;
  for (const std::string& substring : substrings) expected += "\n  " + substring;
  ADD_FAILURE() << "expected an InputError whose message contains:" << expected;
}

}  // namespace parity::testing
