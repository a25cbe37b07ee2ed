// The rules for a file a command writes where the user said (parity/common/output_path.h): an
// empty name, an existing file without overwrite, and a link are refused; a write replaces the
// file whole and never goes through a link, neither at the path nor at its temporary file.
#include "parity/common/output_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

TEST(OutputPath, AnEmptyNameIsRefused) {
  testing::expect_input_error([] { require_output_name("", "--out"); },
                              {"--out is empty", "current folder"});
  testing::expect_input_error([] { check_output_file("", "--report", true); },
                              {"--report is empty"});
}

TEST(OutputPath, AnExistingFileIsRefusedUnlessOverwriteIsGiven) {
  testing::TempDir temp;
  const fs::path file = temp.path("init.safetensors");
  EXPECT_NO_THROW(check_output_file(file, "--out", false));  // not there yet
  testing::write_bytes(file, "old");
  testing::expect_input_error([&] { check_output_file(file, "--out", false); },
                              {"--out", file.string(), "already exists", "--overwrite"});
  EXPECT_NO_THROW(check_output_file(file, "--out", true));
  EXPECT_EQ(testing::read_bytes(file), "old");  // a check writes nothing
}

TEST(OutputPath, AFolderIsNoFile) {
  testing::TempDir temp;
  testing::expect_input_error([&] { check_output_file(temp.path(), "--out", true); },
                              {"is a folder, not a file"});
}

TEST(OutputPath, ALinkIsRefusedEvenWithOverwrite) {
  testing::TempDir temp;
  const fs::path target = temp.path("precious");
  testing::write_bytes(target, "keep me");
  const fs::path link = temp.path("out.safetensors");
  fs::create_symlink(target, link);
  testing::expect_input_error([&] { check_output_file(link, "--out", true); },
                              {"symbolic link", target.string(), "name the file itself"});
  testing::expect_input_error([&] { write_output_file(link, "new", "the file"); },
                              {"cannot write the file", "symbolic link"});
  EXPECT_EQ(testing::read_bytes(target), "keep me");
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST(OutputPath, AWriteReplacesTheFileWholeAndLeavesNoTemporaryFile) {
  testing::TempDir temp;
  const fs::path file = temp.path("report.json");
  testing::write_bytes(file, "an old and longer text");
  write_output_file(file, "new", "the report file");
  EXPECT_EQ(testing::read_bytes(file), "new");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(temp.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

// Someone who can write the folder plants links under the names the temporary file takes from
// this process (its pid and a counter, which the tests before this one have advanced by fewer
// than 2,000 writes): the write must not go through any of them; it may give up instead.
TEST(OutputPath, ALinkPlantedWhereTheTemporaryFileGoesIsNotFollowed) {
  testing::TempDir temp;
  const fs::path target = temp.path("precious");
  testing::write_bytes(target, "keep me");
  const fs::path file = temp.path("init.safetensors");
  for (int counter = 0; counter < 2000; ++counter) {
    fs::create_symlink(target, temp.path(".init.safetensors.tmp" + std::to_string(getpid()) +
                                         "-" + std::to_string(counter)));
  }
  try {
    write_output_file(file, "new", "the file");
    EXPECT_EQ(testing::read_bytes(file), "new");
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot write the file"), std::string::npos);
  }
  EXPECT_EQ(testing::read_bytes(target), "keep me");
}

TEST(OutputPath, AnUnwritableFolderIsReportedWithTheFile) {
  testing::expect_input_error(
      [] { write_output_file("/no/such/folder/report.md", "x", "the report file"); },
      {"cannot write the report file /no/such/folder/report.md"});
}

}  // namespace
}  // namespace parity
