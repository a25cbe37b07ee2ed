// rng.jsonl (rng_streams.h) with real files: masks summarised, written by RunDirWriter, read
// back by read_run_dir, and every damage the reader must name by file, line, step, replica and
// site.
#include "parity/common/rng_streams.h"

#include <gtest/gtest.h>

#include <string>

#include "parity/common/digest.h"
#include "parity/common/run_dir.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::TempDir;
using testing::write_bytes;

RunInfo two_replica_info() {
  RunInfo info;
  info.producer = "pmap_engine";
  info.case_name = "vit";
  info.replicas = 2;
  info.steps = 2;
  return info;
}

StepMetrics step_metrics(int64_t step) {
  StepMetrics metrics;
  metrics.step = step;
  metrics.replica_losses = {1.0, 1.0};
  metrics.samples_digest = "cbf29ce484222325";
  return metrics;
}

// Mask of `size` elements keeping every element whose index is not a multiple of `period`.
std::vector<uint8_t> periodic_mask(size_t size, size_t period, size_t offset = 0) {
  std::vector<uint8_t> keep(size);
  for (size_t i = 0; i < size; ++i) keep[i] = (i + offset) % period != 0;
  return keep;
}

std::vector<MaskDraw> step_draws(int64_t step) {
  return {summarise_mask(step, 0, "Dropout_0", 0.1, periodic_mask(5000, 10, 0), RngKeyWords{1, 2}),
          summarise_mask(step, 1, "Dropout_0", 0.1, periodic_mask(5000, 10, 3), RngKeyWords{3, 4})};
}

void write_run(const fs::path& dir) {
  RunDirWriter writer(dir, two_replica_info());
  for (int64_t step = 0; step < 2; ++step) {
    writer.append_rng_draws(step_draws(step));
    writer.append_step(step_metrics(step));
  }
  writer.finish();
}

// Elements 0, 10, 20, ... dropped: 4500 of 5000 kept; the first 4096 go into the prefix, element
// i as bit i % 8 of byte i / 8, so byte 0 holds elements 0..7 (0 dropped): 0b11111110.
TEST(RngStreams, SummaryCountsDigestsAndPacksTheFirst4096Elements) {
  const std::vector<uint8_t> keep = periodic_mask(5000, 10);
  const MaskDraw draw = summarise_mask(7, 1, "Dropout_0", 0.1, keep);
  EXPECT_EQ(draw.size, 5000);
  EXPECT_EQ(draw.kept, 4500);
  EXPECT_EQ(draw.prefix.size(), 512u);
  EXPECT_EQ(draw.prefix[0], 0b11111110);
  EXPECT_EQ(draw.prefix[1], 0b11111011);  // elements 8..15: 10 dropped
  for (int64_t i = 0; i < kMaskPrefixBits; ++i) EXPECT_EQ(prefix_bit(draw, i), i % 10 != 0) << i;
  EXPECT_EQ(draw.digest, Fnv1a64().update(keep.data(), keep.size()).hex());
  std::vector<uint8_t> other = keep;
  other[4999] = 0;  // beyond the prefix: only the digest and the count see it
  EXPECT_NE(summarise_mask(7, 1, "Dropout_0", 0.1, other).digest, draw.digest);
  EXPECT_EQ(summarise_mask(7, 1, "Dropout_0", 0.1, other).prefix, draw.prefix);
}

TEST(RngStreams, WrittenBeforeEachStepAndReadBackWithTheRun) {
  TempDir dir;
  write_run(dir.path());
  const RunDir run = read_run_dir(dir.path());
  ASSERT_EQ(run.rng.size(), 4u);
  EXPECT_EQ(run.rng[1].step, 0);
  EXPECT_EQ(run.rng[1].replica, 1);
  ASSERT_TRUE(run.rng[1].key.has_value());
  EXPECT_EQ(*run.rng[1].key, (RngKeyWords{3, 4}));
  EXPECT_EQ(run.rng[1].digest, step_draws(0)[1].digest);
  EXPECT_EQ(run.rng[1].prefix, step_draws(0)[1].prefix);
}

TEST(RngStreams, ARunWithoutDropoutHasNoFileAndNoDraws) {
  TempDir dir;
  {
    RunDirWriter writer(dir.path(), two_replica_info());
    writer.append_step(step_metrics(0));
    writer.append_step(step_metrics(1));
    writer.finish();
  }
  EXPECT_FALSE(fs::exists(rng_streams_path(dir.path())));
  EXPECT_TRUE(read_run_dir(dir.path()).rng.empty());
}

// Rewrites line `line` (1-based) of rng.jsonl with `text`.
void replace_line(const fs::path& dir, size_t line, const std::string& text) {
  std::string content = testing::read_bytes(rng_streams_path(dir));
  size_t start = 0;
  for (size_t i = 1; i < line; ++i) start = content.find('\n', start) + 1;
  const size_t end = content.find('\n', start);
  content.replace(start, end - start, text);
  write_bytes(rng_streams_path(dir), content);
}

TEST(RngStreams, MalformedLinesAreRefusedWithFileAndLine) {
  TempDir dir;
  write_run(dir.path());
  const std::string file = rng_streams_path(dir.path()).string();
  const std::string good = mask_draw_to_json_line(step_draws(0)[1]);
  const auto refused_with = [&](const std::string& line,
                                std::initializer_list<std::string> expected) {
    replace_line(dir.path(), 2, line);
    expect_input_error([&] { read_run_dir(dir.path()); }, expected);
    replace_line(dir.path(), 2, good);
  };
  refused_with(R"({"step": 0, "replica": 1})", {file + " line 2", "missing key \"site\""});
  std::string bad_replica = good;
  bad_replica.replace(bad_replica.find("\"replica\":1"), 11, "\"replica\":2");
  refused_with(bad_replica, {file + " line 2", "replica 2 is outside 0..1"});
  std::string bad_kept = good;
  bad_kept.replace(bad_kept.find("\"kept\":4500"), 11, "\"kept\":5001");
  refused_with(bad_kept, {"kept 5001 of size 5000"});
  std::string short_prefix = good;
  short_prefix.replace(short_prefix.find("\"prefix\":\"") + 10, 2, "");
  refused_with(short_prefix, {"key \"prefix\": expected 1024 hex digits", "found 1022 digits"});
  std::string few_kept = good;
  few_kept.replace(few_kept.find("\"kept\":4500"), 11, "\"kept\":3000");
  refused_with(few_kept, {"the prefix keeps 3687 elements but \"kept\" says 3000"});
}

TEST(RngStreams, AMissingReplicaOrStepAndMasksOfDifferentSizesAreNamed) {
  TempDir dir;
  write_run(dir.path());
  const std::string file = rng_streams_path(dir.path()).string();
  const std::string content = testing::read_bytes(rng_streams_path(dir.path()));
  // Drop line 4 (step 1, replica 1).
  write_bytes(rng_streams_path(dir.path()), content.substr(0, content.rfind('\n', content.size() - 2) + 1));
  expect_input_error([&] { read_run_dir(dir.path()); },
                     {file, "no draw for step 1, replica 1, site \"Dropout_0\""});
  write_bytes(rng_streams_path(dir.path()), content);
  replace_line(dir.path(), 2,
               mask_draw_to_json_line(summarise_mask(0, 1, "Dropout_0", 0.1, periodic_mask(4000, 10))));
  expect_input_error([&] { read_run_dir(dir.path()); },
                     {file + " line 2", "replica 1's mask at step 0, site \"Dropout_0\" has 4000 "
                                        "elements, replica 0's 5000"});
  write_bytes(rng_streams_path(dir.path()), content);
  replace_line(dir.path(), 2, mask_draw_to_json_line(step_draws(0)[0]));
  expect_input_error([&] { read_run_dir(dir.path()); },
                     {file + " line 2", "step 0, replica 0, site \"Dropout_0\" is recorded twice"});
}

}  // namespace
}  // namespace parity
