// Every input kept under tests/data/fuzz/<parser>/ (inputs the fuzzers of fuzz/ found, and
// hand-made files showing each kind of damage a parser must refuse; tests/data/fuzz/README.md
// lists them) is fed to the real reader, as the fuzz target fed it: each must be refused with an
// InputError whose message names the file (or, for the readers of a directory, the directory).
// One test per kept input; a parser folder that has no reader here fails the suite, so a new
// folder cannot go untested.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "parity/common/case_spec.h"
#include "parity/common/dataset.h"
#include "parity/common/error.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/interop/metrics_import.h"
#include "parity/interop/tf_events.h"
#include "parity/interop/tfrecord.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

const fs::path kInputs = fs::path(PARITY_SOURCE_DIR) / "tests" / "data" / "fuzz";

std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The reader each fuzz target calls, by the target's name (fuzz/fuzz_<parser>.cpp), on one kept
// input: a file, or a directory for the targets that write several files.
const std::map<std::string, std::function<void(const fs::path&)>>& readers() {
  static const std::map<std::string, std::function<void(const fs::path&)>> table = {
      {"tfrecord", [](const fs::path& p) { interop::read_tfrecords(p); }},
      {"tf_events", [](const fs::path& p) { interop::read_event_file(p); }},
      {"metrics_jsonl",
       [](const fs::path& p) { interop::read_metrics(p, interop::MetricsFormat::kJsonLines); }},
      {"metrics_csv",
       [](const fs::path& p) { interop::read_metrics(p, interop::MetricsFormat::kCsv); }},
      {"safetensors", [](const fs::path& p) { read_safetensors(p); }},
      {"npy", [](const fs::path& p) { read_npy(p); }},
      {"npz", [](const fs::path& p) { read_npz(p); }},
      // A .toml file, or a directory with fuzz.toml and overrides.txt (one --set per line).
      {"case_toml",
       [](const fs::path& p) {
         if (fs::is_directory(p)) {
           load_case((p / "fuzz.toml").string(), lines_of(p / "overrides.txt"));
         } else {
           load_case(p.string());
         }
       }},
      // A directory holding one split's two IDX .gz files.
      {"fashion_mnist",
       [](const fs::path& p) {
         load_fashion_mnist_from(p, fs::exists(p / "t10k-images-idx3-ubyte.gz") ? "test" : "train");
       }},
      {"run_dir", [](const fs::path& p) { read_run_dir(p); }},
  };
  return table;
}

struct KeptInput {
  std::string parser;
  fs::path path;
  std::string relative() const { return parser + "/" + path.filename().string(); }
};

std::vector<KeptInput> kept_inputs() {
  std::vector<KeptInput> inputs;
  if (!fs::is_directory(kInputs)) return inputs;
  for (const auto& folder : fs::directory_iterator(kInputs)) {
    if (!folder.is_directory()) continue;
    for (const auto& entry : fs::directory_iterator(folder.path())) {
      inputs.push_back({folder.path().filename().string(), entry.path()});
    }
  }
  std::sort(inputs.begin(), inputs.end(),
            [](const KeptInput& a, const KeptInput& b) { return a.relative() < b.relative(); });
  return inputs;
}

// GoogleTest names a failing parameter with this.
void PrintTo(const KeptInput& input, std::ostream* out) { *out << input.relative(); }

class FuzzRegression : public ::testing::TestWithParam<KeptInput> {};

TEST_P(FuzzRegression, RefusedWithAnInputErrorNamingTheFile) {
  const KeptInput& input = GetParam();
  const auto reader = readers().find(input.parser);
  ASSERT_NE(reader, readers().end())
      << "tests/data/fuzz/" << input.parser << " has no reader in " << __FILE__;
  try {
    reader->second(input.path);
    ADD_FAILURE() << input.relative() << " was read without an error";
  } catch (const InputError& error) {
    if (input.parser == "case_toml") {
      // An override's error names the override ("--set train.lr=x: ..."), not the file.
      EXPECT_THAT(error.what(), ::testing::AnyOf(::testing::HasSubstr(input.path.string()),
                                                 ::testing::HasSubstr("--set ")));
    } else {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(input.path.string()));
    }
  }
  // Any other exception fails the test through GoogleTest's own handler, with its message.
}

// Every parser has at least one kept input, so each reader's refusal is exercised.
TEST(FuzzRegressionInputs, EveryParserHasKeptInputs) {
  for (const auto& [parser, reader] : readers()) {
    const fs::path folder = kInputs / parser;
    EXPECT_TRUE(fs::is_directory(folder) && !fs::is_empty(folder))
        << "no kept inputs in " << folder;
  }
}

std::string test_name(const ::testing::TestParamInfo<KeptInput>& info) {
  std::string name = info.param.parser + "_" + info.param.path.filename().string();
  for (char& c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Kept, FuzzRegression, ::testing::ValuesIn(kept_inputs()), test_name);

}  // namespace
}  // namespace parity
