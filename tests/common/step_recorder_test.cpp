// The step recorder both producers write their runs with, on a real run directory: what a step
// line and a record step hold, that a rank or process that does not write records nothing, and
// that a non-finite loss stops the run naming the step and the replica.
#include "parity/common/step_recorder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "parity/common/digest.h"
#include "parity/common/error.h"
#include "test_files.h"

namespace parity {
namespace {

using ::testing::HasSubstr;

CaseSpec two_step_case() {
  return load_case("mlp2-fmnist",
                   {"train.steps=2", "parallel.replicas=2", "train.record_steps=[1]"});
}

StepRecord step_record(int64_t step) {
  StepRecord record;
  record.step = step;
  record.loss = 2.25;
  record.replica_losses = {2.0, 2.5};
  record.grad_norm = 0.5;
  record.param_norm = 3.0;
  record.step_seconds = 0.01;
  record.global_sample_ids = {4, 1, 4, 7};  // 4 repeats: one duplicate
  return record;
}

TEST(StepRecorder, WritesEachStepTheRecordStepsTensorsAndTheTotals) {
  testing::TempDir temp;
  const CaseSpec spec = two_step_case();
  RunDirWriter writer(temp.path("run"), run_info_for_case(spec, "pmap_engine"));
  const StepRecorder recorder(spec, &writer, "device");
  EXPECT_FALSE(recorder.records_tensors(0));
  EXPECT_TRUE(recorder.records_tensors(1));
  const NamedTensors grads = {{"dense0.kernel", HostTensor::from_f32({2}, {0.5f, -1.0f})}};
  const NamedTensors params = {{"dense0.kernel", HostTensor::from_f32({2}, {1.0f, 2.0f})}};
  const NamedTensors batch_stats = {{"BatchNorm_0/var", HostTensor::from_f32({2}, {0.25f, 4.0f})}};
  for (int64_t step : {0, 1}) {
    recorder.check_losses_finite(step_record(step));
    recorder.record_step(step_record(step));
  }
  const std::vector<uint64_t> digests = {digest_named_tensors(params), 0xFFFFFFFFFFFFFFFFull};
  recorder.record_tensors(1, grads, params, batch_stats, digests);
  RunTotals totals;
  totals.setup_seconds = 1.5;
  totals.step_seconds = {0.2, 0.01};
  totals.memory.peak_bytes_per_replica = {100, 200};
  totals.memory.method = "counted";
  totals.results = {{"final_loss", 2.25}};
  recorder.finish(totals);

  const RunDir run = read_run_dir(temp.path("run"));
  EXPECT_EQ(run.info.status, "complete");
  ASSERT_EQ(run.steps.size(), 2u);
  const StepMetrics& line = run.steps[1];
  EXPECT_EQ(line.loss, 2.25);
  EXPECT_EQ(line.replica_losses, (std::vector<double>{2.0, 2.5}));
  EXPECT_EQ(line.lr, spec.train.lr);  // the case's
  EXPECT_EQ(line.samples_digest, digest_sample_ids({4, 1, 4, 7}));
  EXPECT_EQ(line.samples_set_digest, digest_sample_set({4, 1, 4, 7}));
  EXPECT_EQ(line.duplicate_samples, 1);
  EXPECT_EQ(run.tensor_steps, (std::vector<int64_t>{1}));
  const NamedTensors tensors = read_step_tensors(run.dir, 1);
  EXPECT_TRUE(tensors.at("grads/dense0.kernel").bytes == grads.at("dense0.kernel").bytes);
  EXPECT_TRUE(tensors.at("params/dense0.kernel").bytes == params.at("dense0.kernel").bytes);
  EXPECT_TRUE(tensors.at("batch_stats/BatchNorm_0/var").bytes ==
              batch_stats.at("BatchNorm_0/var").bytes);
  // Digests are unsigned 64-bit values carried bit for bit in I64 slots.
  const HostTensor& slots = tensors.at("replicas/param_digests");
  ASSERT_EQ(slots.num_bytes(), 2 * sizeof(uint64_t));
  std::vector<uint64_t> read_back(2);
  std::memcpy(read_back.data(), slots.bytes.data(), slots.num_bytes());
  EXPECT_EQ(read_back, digests);
  EXPECT_EQ(run.info.memory.peak_bytes_per_replica, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(run.info.timings.setup_seconds, 1.5);
  EXPECT_EQ(run.info.results.at("final_loss"), 2.25);
}

TEST(StepRecorder, ARecorderWithoutAWriterRecordsNothingButStillChecksLosses) {
  const CaseSpec spec = two_step_case();
  const StepRecorder recorder(spec, nullptr, "rank");
  EXPECT_FALSE(recorder.writes());
  recorder.record_step(step_record(0));  // nothing to write to, nothing thrown
  StepRecord bad = step_record(0);
  bad.replica_losses[1] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(recorder.check_losses_finite(bad), RunError);
}

TEST(StepRecorder, ANonFiniteLossStopsTheRunNamingTheStepAndEachReplica) {
  testing::TempDir temp;
  const CaseSpec spec = two_step_case();
  RunDirWriter writer(temp.path("run"), run_info_for_case(spec, "ddp_ref"));
  const StepRecorder recorder(spec, &writer, "rank");
  StepRecord record = step_record(1);
  record.replica_losses = {std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::infinity()};
  EXPECT_THAT([&] { recorder.check_losses_finite(record); },
              ::testing::ThrowsMessage<RunError>(
                  HasSubstr("step 1: the loss is not finite on rank 0 (NaN), rank 1 (-inf)")));
  const RunInfo info = read_run_dir(temp.path("run")).info;
  EXPECT_EQ(info.status, "incomplete");
  EXPECT_THAT(info.failure, HasSubstr("not finite on rank 0 (NaN)"));
}

// A jit over the global batch records no replica losses: its global loss is what is checked.
TEST(StepRecorder, WithoutReplicaLossesTheGlobalLossIsChecked) {
  testing::TempDir temp;
  const CaseSpec spec = two_step_case();
  RunDirWriter writer(temp.path("run"), run_info_for_case(spec, "pmap_engine"));
  const StepRecorder recorder(spec, &writer, "device");
  StepRecord record = step_record(0);
  record.replica_losses.clear();
  recorder.check_losses_finite(record);  // finite: nothing thrown
  record.loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT([&] { recorder.check_losses_finite(record); },
              ::testing::ThrowsMessage<RunError>(
                  HasSubstr("step 0: the loss is not finite on the global batch (NaN)")));
}

// A layers model's outputs at its first record step only, named by their intermediate paths;
// a producer that records other paths or shapes than the case's is a bug, refused.
TEST(StepRecorder, RecordsLayerOutputsAtTheFirstRecordStepUnderTheCasesPaths) {
  testing::TempDir temp;
  const CaseSpec spec = load_case(
      "cnn-fmnist", {"train.steps=3", "train.record_steps=[1, 2]",
                     "model.layers=[{ kind = \"flatten\" }, { kind = \"dense\", features = 10 }]"});
  RunDirWriter writer(temp.path("run"), run_info_for_case(spec, "pmap_engine"));
  const StepRecorder recorder(spec, &writer, "device");
  EXPECT_FALSE(recorder.records_intermediates(0));
  EXPECT_TRUE(recorder.records_intermediates(1));
  EXPECT_FALSE(recorder.records_intermediates(2));
  EXPECT_FALSE(StepRecorder(spec, nullptr, "device").records_intermediates(1));

  const HostTensor input = HostTensor::zeros(DType::F32, {2, 28, 28, 1});
  const NamedTensors outputs = {
      {"00_flatten", HostTensor::zeros(DType::F32, {2, 784})},
      {"01_dense", HostTensor::from_f32({2, 10}, std::vector<float>(20, 0.5f))}};
  NamedTensors wrong_shape = outputs;
  wrong_shape.at("01_dense") = HostTensor::zeros(DType::F32, {2, 11});
  EXPECT_THAT(
      [&] { recorder.record_intermediates(1, input, wrong_shape); },
      ::testing::ThrowsMessage<InternalError>(HasSubstr("01_dense (2, 11) (expected (2, 10))")));
  NamedTensors extra = outputs;
  extra.emplace("02_relu", HostTensor::zeros(DType::F32, {2, 10}));
  EXPECT_THROW(recorder.record_intermediates(1, input, extra), InternalError);

  recorder.record_intermediates(1, input, outputs);
  const RunDir run = read_run_dir(temp.path("run"));
  EXPECT_EQ(run.intermediate_steps, (std::vector<int64_t>{1}));
  EXPECT_TRUE(run.tensor_steps.empty());  // the step's own tensors are another file
  const NamedTensors recorded = read_step_intermediates(run.dir, 1);
  ASSERT_EQ(recorded.size(), 3u);
  EXPECT_EQ(recorded.at("input").shape, (Shape{2, 28, 28, 1}));
  EXPECT_EQ(recorded.at("intermediates/00_flatten").shape, (Shape{2, 784}));
  EXPECT_TRUE(recorded.at("intermediates/01_dense").bytes == outputs.at("01_dense").bytes);
  EXPECT_THAT([&] { read_step_intermediates(run.dir, 2); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("recorded steps: 1")));
}

}  // namespace
}  // namespace parity
