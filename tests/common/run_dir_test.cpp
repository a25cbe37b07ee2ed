// Run directories with real files in a temporary folder: round trips (non-finite numbers
// included), the writer's refusal to reuse a run, incomplete runs, and every kind of bad input
// the reader must name precisely.
#include "parity/common/run_dir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/tensor_file.h"
#include "test_files.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

RunInfo sample_info() {
  RunInfo info;
  info.producer = "ddp_ref";
  info.case_name = "mlp_fashion_mnist";
  info.case_hash = "0123456789abcdef";
  info.case_toml = "[case]\nname = \"mlp_fashion_mnist\"\n";
  info.replicas = 4;
  info.processes = 2;
  info.dtype = "float32";
  info.optimizer = "adam";
  info.seed = 18446744073709551615ull;  // the full uint64 range survives JSON
  info.versions = {{"parity", "0.1.0"}, {"libtorch", "1.13.1"}};
  info.host = "test-host";
  info.started_at = "2026-12-02T16:30:00Z";
  info.timings = {0.5, 1.25, 0.01, 0.002, 9};
  info.memory.peak_bytes_per_replica = {1000, 2000, 3000, 4000};
  info.memory.method = "counting CPU allocator (thread ranks)";
  info.results = {{"final_loss", 0.25}, {"test_accuracy", 0.875}};
  return info;
}

StepMetrics sample_step(int64_t step) {
  StepMetrics metrics;
  metrics.step = step;
  metrics.loss = 2.5 - 0.125 * static_cast<double>(step);
  metrics.replica_losses = {2.5, 2.25, 2.75, 2.5};
  metrics.grad_norm = 1.0 / 3.0;  // not exactly representable in decimal: checks round-trip digits
  metrics.param_norm = 10.5;
  metrics.lr = 1e-3;
  metrics.step_seconds = 0.0125;
  metrics.samples_digest = "cbf29ce484222325";
  return metrics;
}

NamedTensors sample_tensors() {
  NamedTensors tensors;
  tensors["dense0.kernel"] = HostTensor::from_f32({2, 2}, {1.0f, -2.0f, 0.5f, 4.0f});
  tensors["dense0.bias"] = HostTensor::from_f32({2}, {0.25f, -0.75f});
  return tensors;
}

// A finished run with three steps, tensors at steps 0 and 2.
void write_sample_run(const fs::path& dir) {
  RunDirWriter writer(dir, sample_info());
  for (int64_t step = 0; step < 3; ++step) writer.append_step(sample_step(step));
  writer.write_tensors(0, sample_tensors());
  writer.write_tensors(2, sample_tensors());
  writer.finish();
}

// Edits run.json as JSON, for the bad-input tests.
template <typename Edit>
void edit_run_json(const fs::path& dir, Edit edit) {
  nlohmann::ordered_json run = nlohmann::ordered_json::parse(read_bytes(dir / "run.json"));
  edit(run);
  write_bytes(dir / "run.json", run.dump(2));
}

TEST(RunDir, WriteReadRoundTrip) {
  TempDir temp;
  const fs::path dir = temp.path() / "run";
  RunDirWriter writer(dir, sample_info());
  StepMetrics with_replicas = sample_step(1);
  with_replicas.replica_samples = {"a1", "b2", "c3", "d4"};
  with_replicas.samples_set_digest = "0011223344556677";
  with_replicas.duplicate_samples = 3;
  writer.append_step(sample_step(0));
  writer.append_step(with_replicas);
  writer.append_step(sample_step(5));
  writer.write_tensors(0, sample_tensors());
  writer.write_tensors(5, sample_tensors());
  writer.finish();

  const RunDir run = read_run_dir(dir);
  const RunInfo expected = sample_info();
  EXPECT_EQ(run.dir, dir);
  EXPECT_EQ(run.info.schema_version, kRunSchemaVersion);
  EXPECT_EQ(run.info.producer, expected.producer);
  EXPECT_EQ(run.info.status, "complete");
  EXPECT_EQ(run.info.failure, "");
  EXPECT_EQ(run.info.case_name, expected.case_name);
  EXPECT_EQ(run.info.case_hash, expected.case_hash);
  EXPECT_EQ(run.info.case_toml, expected.case_toml);
  EXPECT_EQ(run.info.replicas, 4);
  EXPECT_EQ(run.info.processes, 2);
  EXPECT_EQ(run.info.dtype, "float32");
  EXPECT_EQ(run.info.optimizer, "adam");
  EXPECT_EQ(run.info.seed, expected.seed);
  EXPECT_EQ(run.info.versions, expected.versions);
  EXPECT_EQ(run.info.host, "test-host");
  EXPECT_EQ(run.info.started_at, expected.started_at);
  EXPECT_EQ(run.info.timings.setup_seconds, 0.5);
  EXPECT_EQ(run.info.timings.first_step_seconds, 1.25);
  EXPECT_EQ(run.info.timings.steady_step_median_seconds, 0.01);
  EXPECT_EQ(run.info.timings.steady_step_spread_seconds, 0.002);
  EXPECT_EQ(run.info.timings.steady_steps, 9);
  EXPECT_EQ(run.info.memory.peak_bytes_per_replica, expected.memory.peak_bytes_per_replica);
  EXPECT_EQ(run.info.memory.method, expected.memory.method);
  EXPECT_EQ(run.info.results, expected.results);

  ASSERT_EQ(run.steps.size(), 3u);
  EXPECT_EQ(run.steps[0].step, 0);
  EXPECT_EQ(run.steps[1].step, 1);
  EXPECT_EQ(run.steps[2].step, 5);
  const StepMetrics& read_back = run.steps[1];
  EXPECT_EQ(read_back.loss, with_replicas.loss);
  EXPECT_EQ(read_back.replica_losses, with_replicas.replica_losses);
  EXPECT_EQ(read_back.grad_norm, with_replicas.grad_norm);  // bit-exact, not approximately
  EXPECT_EQ(read_back.param_norm, with_replicas.param_norm);
  EXPECT_EQ(read_back.lr, with_replicas.lr);
  EXPECT_EQ(read_back.step_seconds, with_replicas.step_seconds);
  EXPECT_EQ(read_back.samples_digest, with_replicas.samples_digest);
  EXPECT_EQ(read_back.replica_samples, with_replicas.replica_samples);
  EXPECT_TRUE(run.steps[0].replica_samples.empty());
  EXPECT_EQ(read_back.samples_set_digest, "0011223344556677");
  EXPECT_EQ(read_back.duplicate_samples, 3);
  EXPECT_TRUE(run.steps[0].samples_set_digest.empty());  // optional keys stay absent
  EXPECT_FALSE(run.steps[0].duplicate_samples.has_value());

  EXPECT_EQ(run.tensor_steps, (std::vector<int64_t>{0, 5}));
  const NamedTensors tensors = read_step_tensors(dir, 5);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors.at("dense0.kernel").shape, (Shape{2, 2}));
  EXPECT_EQ(tensors.at("dense0.kernel").bytes, sample_tensors().at("dense0.kernel").bytes);
  EXPECT_TRUE(fs::exists(dir / "tensors" / "step_000005.safetensors"));
}

TEST(RunDir, FilesHaveTheDocumentedShape) {
  TempDir temp;
  write_sample_run(temp.path());
  const auto run = nlohmann::json::parse(read_bytes(temp.path() / "run.json"));
  EXPECT_EQ(run.at("format"), "parity-run");
  EXPECT_EQ(run.at("schema_version"), 3);
  EXPECT_EQ(run.at("case").at("name"), "mlp_fashion_mnist");
  EXPECT_FALSE(run.contains("steps"));  // sample_info() promises none
  EXPECT_EQ(run.at("memory").at("peak_bytes_per_replica").size(), 4u);

  // metrics.jsonl: one compact object per line, newline-terminated, no replica_samples key when
  // there are none.
  const std::string metrics = read_bytes(temp.path() / "metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.back(), '\n');
  std::istringstream lines(metrics);
  std::string line;
  int64_t count = 0;
  while (std::getline(lines, line)) {
    const auto object = nlohmann::json::parse(line);
    EXPECT_TRUE(object.is_object());
    EXPECT_FALSE(object.contains("replica_samples"));
    for (const char* key : {"step", "loss", "replica_losses", "grad_norm", "param_norm", "lr",
                            "step_seconds", "samples_digest"}) {
      EXPECT_TRUE(object.contains(key)) << key;
    }
    ++count;
  }
  EXPECT_EQ(count, 3);
}

TEST(RunDir, NonFiniteNumbersRoundTrip) {
  TempDir temp;
  RunInfo info = sample_info();
  info.results["final_loss"] = std::numeric_limits<double>::quiet_NaN();
  RunDirWriter writer(temp.path(), info);
  StepMetrics metrics = sample_step(0);
  metrics.loss = std::numeric_limits<double>::quiet_NaN();
  metrics.replica_losses = {1.0, std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(), 2.0};
  metrics.grad_norm = std::numeric_limits<double>::infinity();
  metrics.param_norm = -std::numeric_limits<double>::infinity();
  writer.append_step(metrics);
  writer.finish();

  const std::string line = read_bytes(temp.path() / "metrics.jsonl");
  EXPECT_NE(line.find("\"loss\":\"NaN\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"grad_norm\":\"Infinity\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"param_norm\":\"-Infinity\""), std::string::npos) << line;

  const RunDir run = read_run_dir(temp.path());
  ASSERT_EQ(run.steps.size(), 1u);
  const StepMetrics& read_back = run.steps[0];
  EXPECT_TRUE(std::isnan(read_back.loss));
  EXPECT_EQ(read_back.replica_losses[0], 1.0);
  EXPECT_TRUE(std::isnan(read_back.replica_losses[1]));
  EXPECT_EQ(read_back.replica_losses[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(read_back.grad_norm, std::numeric_limits<double>::infinity());
  EXPECT_EQ(read_back.param_norm, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(run.info.results.at("final_loss")));
}

TEST(RunDir, WriterRefusesToReuseARunUnlessOverwrite) {
  TempDir temp;
  write_sample_run(temp.path());
  expect_input_error([&] { RunDirWriter again(temp.path(), sample_info()); },
                     {"already holds a run (run.json exists)"});
  // The refused writer touched nothing.
  EXPECT_EQ(read_run_dir(temp.path()).steps.size(), 3u);

  {
    RunDirWriter overwriting(temp.path(), sample_info(), /*overwrite=*/true);
    overwriting.append_step(sample_step(7));
    overwriting.finish();
  }
  const RunDir run = read_run_dir(temp.path());
  ASSERT_EQ(run.steps.size(), 1u);  // the old steps are gone
  EXPECT_EQ(run.steps[0].step, 7);
  EXPECT_TRUE(run.tensor_steps.empty());  // and so are the old tensors
}

// A link planted in a run directory (metrics.jsonl, or run.json, pointing at a file of the
// user's) is neither written through nor replaced.
TEST(RunDir, WritersRefuseLinksPlantedInTheFolder) {
  TempDir temp;
  const fs::path precious = temp.path("precious");
  write_bytes(precious, "keep me");
  const fs::path planted = temp.path("planted");
  fs::create_directories(planted);
  fs::create_symlink(precious, planted / "metrics.jsonl");
  expect_input_error([&] { RunDirWriter writer(planted, sample_info()); },
                     {"metrics.jsonl", "symbolic link", "remove the link"});
  EXPECT_EQ(read_bytes(precious), "keep me");

  const fs::path finished = temp.path("finished");
  write_sample_run(finished);
  fs::remove(finished / "run.json");
  fs::create_symlink(precious, finished / "run.json");
  EXPECT_THROW(write_text_file_atomically(finished / "run.json", "{}"), RunError);
  EXPECT_EQ(read_bytes(precious), "keep me");
  EXPECT_TRUE(fs::is_symlink(finished / "run.json"));
}

TEST(RunDir, MarkIncompleteKeepsWhatWasWritten) {
  TempDir temp;
  RunDirWriter writer(temp.path(), sample_info());
  writer.append_step(sample_step(0));
  writer.append_step(sample_step(1));
  writer.write_tensors(1, sample_tensors());
  writer.mark_incomplete("loss became NaN at step 2 on replica 3");

  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "incomplete");
  EXPECT_EQ(run.info.failure, "loss became NaN at step 2 on replica 3");
  EXPECT_EQ(run.steps.size(), 2u);
  EXPECT_EQ(run.tensor_steps, (std::vector<int64_t>{1}));
}

TEST(RunDir, RunningRunIsReadAsRunning) {
  TempDir temp;
  RunDirWriter writer(temp.path(), sample_info());
  writer.append_step(sample_step(0));
  // No finish(): as if the producer were still running, or had died.
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "running");
  EXPECT_EQ(run.steps.size(), 1u);
  EXPECT_FALSE(run.info.started_at.empty());
}

TEST(RunDir, MissingRunJson) {
  TempDir temp;
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"not a run directory: no run.json in " + temp.path().string()});
  expect_input_error([&] { read_run_dir(temp.path() / "absent"); }, {"not a run directory"});
}

TEST(RunDir, BadJsonNamesTheLine) {
  TempDir temp;
  write_bytes(temp.path() / "run.json",
              "{\n  \"format\": \"parity-run\",\n  \"schema_version\" 1\n}\n");
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {(temp.path() / "run.json").string() + " line 3, column"});
  expect_input_error([&] { read_run_dir(temp.path()); }, {"not valid JSON"});
}

TEST(RunDir, NewerSchemaVersionAsksForAnUpgrade) {
  TempDir temp;
  write_sample_run(temp.path());
  edit_run_json(temp.path(), [](auto& run) { run["schema_version"] = 4; });
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"written by a newer parity (schema 4); this build reads schema 3; upgrade"});
}

TEST(RunDir, SchemaOneRunsWithoutAPromiseAreStillRead) {
  TempDir temp;
  write_sample_run(temp.path());
  edit_run_json(temp.path(), [](auto& run) {
    run["schema_version"] = 1;
    run.erase("steps");
  });
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "complete");
  EXPECT_EQ(run.info.steps, -1);
}

TEST(RunDir, ACompleteRunMissingPromisedStepsIsReadAsIncomplete) {
  TempDir temp;
  RunInfo info = sample_info();
  info.steps = 5;  // the producer promised 5 steps and recorded 3 before saying "complete"
  RunDirWriter writer(temp.path(), info);
  for (int64_t step = 0; step < 3; ++step) writer.append_step(sample_step(step));
  writer.finish();
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "incomplete");
  EXPECT_EQ(run.info.failure,
            "run.json says complete, but metrics.jsonl holds 3 of the 5 steps it promises "
            "(recorded steps 0..2); the run directory was cut short or edited: rerun the producer");
}

TEST(RunDir, ReplicasAndProcessesOutOfRangeAreRefused) {
  TempDir temp;
  write_sample_run(temp.path());
  for (const int64_t replicas : {int64_t{0}, int64_t{100000000}}) {
    edit_run_json(temp.path(), [&](auto& run) { run["replicas"] = replicas; });
    expect_input_error([&] { read_run_dir(temp.path()); },
                       {"key \"replicas\": " + std::to_string(replicas) +
                        " is not a number of replicas (1 to 1048576)"});
  }
  edit_run_json(temp.path(), [](auto& run) {
    run["replicas"] = 4;
    run["processes"] = 5;
  });
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"key \"processes\": 5 is not between 1 and the 4 replicas"});
  edit_run_json(temp.path(), [](auto& run) {
    run["processes"] = 2;
    run["memory"]["peak_bytes_per_replica"] = {1, 2, 3, 4, 5};
  });
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"key \"peak_bytes_per_replica\": 5 values for 4 replicas"});
}

// The style and what each replica holds between steps round-trip; a run written before they
// existed reads them as not recorded; counts that do not fit the replicas are refused.
TEST(RunDir, ParallelStyleAndHeldStateRoundTrip) {
  TempDir temp;
  RunInfo info = sample_info();
  info.parallel_style = "jit-fsdp";
  info.memory.param_bytes_per_replica = {407060, 407060, 407060, 407060};
  info.memory.optimizer_state_bytes_per_replica = {814124, 814124, 814124, 814124};
  info.memory.state_layout = "jit-fsdp over 4 devices: 4 of 4 parameter leaves split";
  {
    RunDirWriter writer(temp.path(), info);
    writer.finish();
  }
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.parallel_style, "jit-fsdp");
  EXPECT_EQ(run.info.memory.param_bytes_per_replica, info.memory.param_bytes_per_replica);
  EXPECT_EQ(run.info.memory.optimizer_state_bytes_per_replica,
            info.memory.optimizer_state_bytes_per_replica);
  EXPECT_EQ(run.info.memory.state_layout, info.memory.state_layout);

  edit_run_json(temp.path(), [](auto& json) {
    json.erase("parallel_style");
    for (const char* key :
         {"param_bytes_per_replica", "optimizer_state_bytes_per_replica", "state_layout"}) {
      json["memory"].erase(key);
    }
  });
  const RunDir older = read_run_dir(temp.path());
  EXPECT_EQ(older.info.parallel_style, "");
  EXPECT_TRUE(older.info.memory.param_bytes_per_replica.empty());
  EXPECT_TRUE(older.info.memory.optimizer_state_bytes_per_replica.empty());

  edit_run_json(temp.path(), [](auto& json) {
    json["memory"]["param_bytes_per_replica"] = {1, 2, 3, 4, 5};
    json["memory"]["optimizer_state_bytes_per_replica"] = {1, 2, 3, 4, 5};
    json["memory"]["state_layout"] = "";
  });
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"run.json", "key \"memory\": 5 parameter and 5 optimizer-state byte counts "
                                  "for 4 replicas"});
  edit_run_json(temp.path(), [](auto& json) {
    json["memory"]["param_bytes_per_replica"] = {1, 2, 3, -4};
    json["memory"]["optimizer_state_bytes_per_replica"] = {1, 2, 3, 4};
  });
  expect_input_error([&] { read_run_dir(temp.path()); }, {"a negative byte count"});
}

TEST(RunDir, ReplicaLossesOfTheWrongLengthAreRefusedWithTheLine) {
  TempDir temp;
  RunDirWriter writer(temp.path(), sample_info());
  writer.append_step(sample_step(0));
  StepMetrics short_step = sample_step(1);
  short_step.replica_losses = {2.5, 2.25, 2.5, 2.5, 2.5};  // 5 values, run.json says 4 replicas
  writer.append_step(short_step);
  writer.finish();
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {(temp.path() / "metrics.jsonl").string() +
                      " line 2: \"replica_losses\" has 5 values but run.json says 4 replicas"});
}

// A run resumed on fewer devices (case S10) says so on each line it logs with fewer losses; a
// line with fewer losses that does not say so is at odds with run.json (schema 3 on).
TEST(RunDir, ALineWithFewerReplicaLossesMustNameItsReplicas) {
  TempDir temp;
  RunDirWriter writer(temp.path(), sample_info());
  writer.append_step(sample_step(0));
  StepMetrics resumed = sample_step(1);
  resumed.replica_losses = {2.5, 2.25};
  resumed.replicas = 2;
  writer.append_step(resumed);
  writer.finish();
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.steps.at(0).replicas, std::nullopt);
  EXPECT_EQ(run.steps.at(1).replicas, 2);

  std::string lines = read_bytes(temp.path() / "metrics.jsonl");
  lines.replace(lines.find(",\"replicas\":2"), std::string(",\"replicas\":2").size(), "");
  write_bytes(temp.path() / "metrics.jsonl", lines);
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {(temp.path() / "metrics.jsonl").string() +
                          " line 2: \"replica_losses\" has 2 values but run.json says 4 replicas",
                      "a run resumed on fewer devices says so with the line's \"replicas\""});
  // Schema 2 lines never named their replicas: fewer losses there are a resume's.
  edit_run_json(temp.path(), [](auto& json) { json["schema_version"] = 2; });
  EXPECT_EQ(read_run_dir(temp.path()).steps.size(), 2u);
}

TEST(RunDir, MoreLinesThanRunJsonPromisesAreRefused) {
  TempDir temp;
  RunInfo info = sample_info();
  info.steps = 2;
  RunDirWriter writer(temp.path(), info);
  for (int64_t step = 0; step < 3; ++step) writer.append_step(sample_step(step));
  writer.finish();
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {(temp.path() / "run.json").string() +
                          ": key \"steps\": the run promises 2 steps, but " +
                          (temp.path() / "metrics.jsonl").string() + " holds 3 (steps 0..2)",
                      "set \"steps\" to 3"});
}

TEST(RunDir, ATensorFileWhoseMetadataNamesAnotherStepIsRefused) {
  TempDir temp;
  write_sample_run(temp.path());
  fs::rename(step_tensors_path(temp.path(), 2), step_tensors_path(temp.path(), 1));
  expect_input_error([&] { read_step_tensors(temp.path(), 1); },
                     {step_tensors_path(temp.path(), 1).string() +
                      ": its metadata says step 2, its name step 1"});
  write_safetensors(step_tensors_path(temp.path(), 2), sample_tensors());
  expect_input_error([&] { read_step_tensors(temp.path(), 2); },
                     {"no \"step\" in its metadata"});
}

// A producer's complete run holds every file its case's record steps promise; an import holds
// what was imported.
TEST(RunDir, ACompleteRunMissingATensorFileItsCasePromisesIsReadAsIncomplete) {
  TempDir temp;
  const CaseSpec spec = load_case("mlp2-fmnist", {"train.steps=3", "parallel.replicas=4"});
  RunInfo info = run_info_for_case(spec, "ddp_ref");
  info.steps = 3;
  {
    RunDirWriter writer(temp.path(), info);
    for (int64_t step = 0; step < 3; ++step) writer.append_step(sample_step(step));
    writer.write_tensors(0, sample_tensors());
    writer.finish();
  }
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "incomplete");
  EXPECT_EQ(run.info.failure,
            "run.json says complete, but 1 of the 2 tensor files its case's train.record_steps "
            "promise is missing (tensors/step_000002.safetensors); the run directory was cut "
            "short or edited: rerun the producer");
  edit_run_json(temp.path(), [](auto& json) { json["producer"] = "import:jsonl"; });
  EXPECT_EQ(read_run_dir(temp.path()).info.status, "complete");
}

TEST(RunDir, ALauncherMarksOnlyARunStillSayingRunning) {
  TempDir temp;
  {
    RunDirWriter writer(temp.path(), sample_info());
    writer.append_step(sample_step(0));
    // The producer is killed here: SIGKILL runs no destructor, so run.json says "running".
    EXPECT_TRUE(mark_run_dir_incomplete(temp.path(), "process 0 was killed by signal 9"));
    EXPECT_EQ(read_run_dir(temp.path()).info.failure, "process 0 was killed by signal 9");
    // A second word does not replace the first.
    EXPECT_FALSE(mark_run_dir_incomplete(temp.path(), "something else"));
    writer.finish();
  }
  EXPECT_FALSE(mark_run_dir_incomplete(temp.path() / "absent", "no run here"));
}

TEST(RunDir, AWriterUnwoundByAnErrorMarksTheRunIncomplete) {
  TempDir temp;
  try {
    RunDirWriter writer(temp.path(), sample_info());
    writer.append_step(sample_step(0));
    throw std::runtime_error("a kernel failed");
  } catch (const std::runtime_error&) {
  }
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "incomplete");
  EXPECT_EQ(run.info.failure,
            "the producer stopped on an error before the end (its error output says which)");
}

TEST(RunDir, WrongFormatIsRejected) {
  TempDir temp;
  write_sample_run(temp.path());
  edit_run_json(temp.path(), [](auto& run) { run["format"] = "something-else"; });
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"not a parity run (format \"something-else\", expected \"parity-run\")"});
}

TEST(RunDir, MissingKeyNamesFileAndKeyPath) {
  TempDir temp;
  write_sample_run(temp.path());
  edit_run_json(temp.path(), [](auto& run) { run["timings"].erase("setup_seconds"); });
  expect_input_error(
      [&] { read_run_dir(temp.path()); },
      {(temp.path() / "run.json").string() + ": missing key \"timings.setup_seconds\""});
}

TEST(RunDir, WrongTypeNamesExpectedAndFound) {
  TempDir temp;
  write_sample_run(temp.path());
  edit_run_json(temp.path(), [](auto& run) { run["replicas"] = "four"; });
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"key \"replicas\": expected an integer, found string \"four\""});
  edit_run_json(temp.path(), [](auto& run) {
    run["replicas"] = 4;
    run["status"] = "paused";
  });
  expect_input_error([&] { read_run_dir(temp.path()); }, {"found \"paused\""});
}

TEST(RunDir, MetricsLineThatIsNotAnObject) {
  TempDir temp;
  write_sample_run(temp.path());
  std::string metrics = read_bytes(temp.path() / "metrics.jsonl");
  metrics.insert(metrics.find('\n') + 1, "[1, 2, 3]\n");
  write_bytes(temp.path() / "metrics.jsonl", metrics);
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"metrics.jsonl line 2: expected a JSON object, found array"});
}

TEST(RunDir, MetricsLineWithBadJsonOrMissingKey) {
  TempDir temp;
  write_sample_run(temp.path());
  const std::string good = read_bytes(temp.path() / "metrics.jsonl");
  write_bytes(temp.path() / "metrics.jsonl", good + "{\"step\": 9,, }\n");
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"metrics.jsonl line 4, column 12: not valid JSON"});
  write_bytes(temp.path() / "metrics.jsonl", good + "{\"step\": 9}\n");
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"metrics.jsonl line 4: missing key \"loss\""});
  write_bytes(temp.path() / "metrics.jsonl",
              good +
                  "{\"step\":9,\"loss\":\"nan\",\"replica_losses\":[],\"grad_norm\":0,"
                  "\"param_norm\":0,\"lr\":0,\"step_seconds\":0,\"samples_digest\":\"\"}\n");
  expect_input_error([&] { read_run_dir(temp.path()); },
                     {"metrics.jsonl line 4: key \"loss\": expected a number (or \"NaN\", "
                      "\"Infinity\", \"-Infinity\"), found string \"nan\""});
}

TEST(RunDir, StepsMustStrictlyIncrease) {
  TempDir temp;
  RunDirWriter writer(temp.path(), sample_info());
  writer.append_step(sample_step(0));
  writer.append_step(sample_step(3));
  writer.append_step(sample_step(3));
  writer.finish();
  expect_input_error(
      [&] { read_run_dir(temp.path()); },
      {"metrics.jsonl line 3: step 3 does not increase (the line before has step 3)"});
}

TEST(RunDir, TruncatedLastLineIsReportedAsSuch) {
  TempDir temp;
  write_sample_run(temp.path());
  const std::string metrics = read_bytes(temp.path() / "metrics.jsonl");
  write_bytes(temp.path() / "metrics.jsonl", metrics + "{\"step\":3,\"loss\":2.1,\"replica_lo");
  expect_input_error(
      [&] { read_run_dir(temp.path()); },
      {"metrics.jsonl line 4: truncated last line (no newline and not complete JSON); "
       "the producer was probably killed while writing it"});
  // A complete last object without its newline is fine.
  write_bytes(temp.path() / "metrics.jsonl", metrics.substr(0, metrics.size() - 1));
  EXPECT_EQ(read_run_dir(temp.path()).steps.size(), 3u);
}

// A reader may look at a run while its producer writes it (a test waiting for steps, a user
// watching): the step being written is not damage, and the steps before it are read.
TEST(RunDir, ARunningRunsHalfWrittenLastStepIsLeftOut) {
  TempDir temp;
  write_sample_run(temp.path());
  edit_run_json(temp.path(), [](auto& run) { run["status"] = "running"; });
  const std::string metrics = read_bytes(temp.path() / "metrics.jsonl");
  write_bytes(temp.path() / "metrics.jsonl", metrics + "{\"step\":3,\"loss\":2.1,\"replica_lo");
  const RunDir run = read_run_dir(temp.path());
  EXPECT_EQ(run.info.status, "running");
  ASSERT_EQ(run.steps.size(), 3u);
  EXPECT_EQ(run.steps.back().step, 2);
}

TEST(RunDir, MissingStepTensorsListsTheRecordedSteps) {
  TempDir temp;
  write_sample_run(temp.path());
  expect_input_error([&] { read_step_tensors(temp.path(), 1); },
                     {"no tensors recorded at step 1 in " + temp.path().string() +
                      " (no step_000001.safetensors); recorded steps: 0 2"});
}

TEST(RunDir, UtcTimestampIsIso8601WithZ) {
  const std::string now = utc_timestamp_now();
  EXPECT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)"))) << now;
}

}  // namespace
}  // namespace parity
