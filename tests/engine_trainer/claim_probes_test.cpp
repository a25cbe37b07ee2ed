// The probes of the documents' figures (engine_trainer/src/programs/communication_probe.cpp,
// memory_probe.cpp), each on its catalogue case, against figures derived by hand below.
#include <gtest/gtest.h>

#include "parity/common/case_spec.h"
#include "programs/program_parts.h"

namespace parity::engine_trainer {
namespace {

double figure(const ProbeResult& result, const std::string& name) {
  const std::optional<double> value = result.figures.number(name);
  EXPECT_TRUE(value.has_value()) << name;
  return value.value_or(0);
}

// C1 on the case's MLP [784, 256, 10] over 8 devices: 784*256 + 256 + 256*10 + 10 = 203530
// parameters, 4 bytes each in f32: S = 814120 bytes. The engine's psum reads devices 1..7 into
// device 0 and copies the sum back: device 0 sends and receives 7 S = 5698840 bytes, the others
// S each, (7 S + 7 S) / 8 = 1.75 S on average. A ring sends 2 * 7/8 * S = 1424710 bytes, 1.75 S.
TEST(ClaimProbes, CommunicationVolumeCountsAReduceToDeviceZero) {
  const ProbeResult result = run_probe_program(load_case("c1-communication-volume"));
  EXPECT_TRUE(result.as_expected) << result.observed;
  EXPECT_EQ(figure(result, "params"), 203530);
  EXPECT_EQ(figure(result, "param_bytes"), 814120);
  EXPECT_EQ(figure(result, "sent_bytes_device0"), 5698840);
  EXPECT_EQ(figure(result, "received_bytes_device0"), 5698840);
  EXPECT_EQ(figure(result, "sent_bytes_other_device"), 814120);
  EXPECT_EQ(figure(result, "received_bytes_other_device"), 814120);
  EXPECT_DOUBLE_EQ(figure(result, "sent_bytes_mean"), 1424710);
  EXPECT_DOUBLE_EQ(figure(result, "ring_bytes_per_device"), 1424710);
  EXPECT_DOUBLE_EQ(figure(result, "ring_ratio_to_params"), 1.75);
  EXPECT_DOUBLE_EQ(figure(result, "engine_ratio_mean"), 1.75);
  EXPECT_DOUBLE_EQ(figure(result, "engine_ratio_device0"), 7);
}

// C2: Llama-2-7B has P = 2 * 32000 * 4096 + 32 * (4 * 4096^2 + 3 * 4096 * 11008 + 2 * 4096)
// + 4096 = 6738415616 parameters. fp16: 2 P bytes = 13.476831232 GB, parameters and gradients
// alike; optax's Adam state is m and v of the parameters' dtype plus a 4-byte i32 count: 4 P + 4
// bytes in fp16, 8 P + 4 in fp32; fp32 master weights 4 P. Mixed precision: 2 P + 2 P + 8 P + 4
// + 4 P = 16 P + 4 bytes = 107.814649860 GB; over 8 devices 13.476831232... GB. At the
// document's 7e9 parameters: (2 P + 4 P + 4) / P * 7 = 42 GB (to 1e-9), 56 with the gradients.
TEST(ClaimProbes, MemoryOfA7bModelFromShapesAlone) {
  const ProbeResult result = run_probe_program(load_case("c2-memory-7b"));
  EXPECT_TRUE(result.as_expected) << result.observed;
  const double p = 6738415616.0;
  EXPECT_EQ(figure(result, "params"), p);
  EXPECT_DOUBLE_EQ(figure(result, "params_fp16_gb"), 2 * p / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "grads_fp16_gb"), 2 * p / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "adam_fp16_gb"), (4 * p + 4) / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "adam_fp32_gb"), (8 * p + 4) / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "master_fp32_gb"), 4 * p / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "ddp_fp16_adam_gb"), (8 * p + 4) / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "ddp_fp32_adam_gb"), (12 * p + 4) / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "ddp_mixed_gb"), (16 * p + 4) / 1e9);
  EXPECT_DOUBLE_EQ(figure(result, "fsdp_mixed_gb"), (16 * p + 4) / 8 / 1e9);
  EXPECT_NEAR(figure(result, "doc_count_with_fp16_adam_gb"), 42, 1e-6);
  EXPECT_NEAR(figure(result, "doc_count_ddp_fp16_adam_gb"), 56, 1e-6);
  EXPECT_NEAR(figure(result, "doc_count_ddp_mixed_gb"), 112, 1e-6);
  EXPECT_DOUBLE_EQ(figure(result, "a100_gb"), 85.89934592);  // 80 * 2^30 bytes
}

}  // namespace
}  // namespace parity::engine_trainer
