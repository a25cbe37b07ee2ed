// The engine under pmap on 8 devices against ddp_ref with 8 ranks: device d reads what rank d
// reads, pmean averages what the Reducer averages. Losses agree within 1e-5 relative over 200
// Adam steps, parameters within 1e-4, reduced gradients at step 0 within 1e-6 of their scale;
// with psum instead of pmean the gradients are exactly 8 times larger (pitfall P2: dividing by
// 8, a power of two, is exact, so pmean * 8 == psum bit for bit).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/init_params.h"
#include "parity/common/run_dir.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"
#include "parity/engine_trainer/engine_trainer.h"
#include "tensor_compare.h"

namespace parity::engine_trainer {
namespace {

const std::vector<std::string> kOverrides = {"train.steps=200", "parallel.replicas=8",
                                             "data.per_replica_batch=64", "train.optimizer=adam",
                                             "train.record_steps=[0, 199]"};

// A directory of this test process's own: ctest runs the tests of this file in parallel.
std::filesystem::path own_directory(const std::string& name) {
  return testing::fresh_directory(name + "-" + std::to_string(getpid()));
}

std::filesystem::path write_init(const std::filesystem::path& dir, const CaseSpec& spec) {
  write_safetensors(dir / "init.safetensors",
                    init_mlp_params(spec.model.widths, spec.init.seed, spec.init.scale));
  return dir / "init.safetensors";
}

std::filesystem::path train_pmap(const CaseSpec& spec, const std::filesystem::path& init,
                                 const std::filesystem::path& out,
                                 const std::string& program = "pmean") {
  engine_trainer::EngineOptions options;
  options.init_file = init;
  options.out_dir = out;
  options.quiet = true;
  options.step.program = program;
  engine_trainer::train(spec, options);
  return out;
}

TEST(PmapVsDdp, EightDevicesWithPmeanMatchDdpWithEightRanksFor200AdamSteps) {
  const auto dir = own_directory("pmap-vs-ddp");
  const CaseSpec spec = load_case("mlp2-fmnist", kOverrides);
  ddp_ref::DdpOptions ddp_options;
  ddp_options.init_file = write_init(dir, spec);
  ddp_options.out_dir = dir / "ddp";
  ddp_options.quiet = true;
  ddp_ref::train(spec, ddp_options);
  RunDir ddp = read_run_dir(ddp_options.out_dir);
  RunDir engine = read_run_dir(train_pmap(spec, ddp_options.init_file, dir / "pmap"));
  ASSERT_EQ(engine.info.status, "complete");
  ASSERT_EQ(engine.steps.size(), 200u);

  // Device d read rank d's samples, and the losses agree at every step, on every device.
  for (size_t s = 0; s < 200; ++s) {
    EXPECT_EQ(engine.steps[s].samples_digest, ddp.steps[s].samples_digest) << "step " << s;
    EXPECT_NEAR(engine.steps[s].loss, ddp.steps[s].loss, 1e-5 * std::abs(ddp.steps[s].loss))
        << "step " << s;
    for (size_t d = 0; d < 8; ++d) {
      EXPECT_NEAR(engine.steps[s].replica_losses[d], ddp.steps[s].replica_losses[d],
                  1e-5 * std::abs(ddp.steps[s].replica_losses[d]))
          << "step " << s << " device " << d;
    }
  }

  NamedTensors ddp0 = read_step_tensors(ddp_options.out_dir, 0);
  NamedTensors engine0 = read_step_tensors(dir / "pmap", 0);
  NamedTensors ddp_last = read_step_tensors(ddp_options.out_dir, 199);
  NamedTensors engine_last = read_step_tensors(dir / "pmap", 199);
  for (const char* name : {"dense0.kernel", "dense0.bias", "dense1.kernel", "dense1.bias"}) {
    const std::string grad = std::string("grads/") + name;
    const std::string param = std::string("params/") + name;
    EXPECT_LE(testing::max_abs_difference(engine0.at(grad), ddp0.at(grad)),
              1e-6 * testing::max_abs(ddp0.at(grad)))
        << grad;
    EXPECT_LE(testing::max_abs_difference(engine_last.at(param), ddp_last.at(param)), 1e-4)
        << param;
  }
  // Every device holds the same parameters, as every DDP rank does.
  const HostTensor& digests = engine_last.at("replicas/param_digests");
  for (int64_t d = 1; d < 8; ++d) {
    EXPECT_EQ(digests.data_as<int64_t>()[d], digests.data_as<int64_t>()[0]) << "device " << d;
  }
}

TEST(PmapVsDdp, PsumGivesEightTimesPmeanAndRunsRepeatBitForBit) {
  const auto dir = own_directory("pmap-psum");
  const CaseSpec spec =
      load_case("mlp2-fmnist", {"train.steps=20", "parallel.replicas=8",
                                "data.per_replica_batch=64", "train.record_steps=[0, 19]"});
  const auto init = write_init(dir, spec);
  const auto first = train_pmap(spec, init, dir / "first");
  const auto second = train_pmap(spec, init, dir / "second");
  const auto summed = train_pmap(spec, init, dir / "psum", "psum");

  NamedTensors sum0 = read_step_tensors(summed, 0);
  NamedTensors mean0 = read_step_tensors(first, 0);
  for (const char* name : {"grads/dense0.kernel", "grads/dense1.bias"}) {
    const HostTensor& sum = sum0.at(name);
    const HostTensor& mean = mean0.at(name);
    for (size_t i = 0; i < sum.num_elements(); ++i) {
      ASSERT_EQ(sum.data_as<float>()[i], 8.0f * mean.data_as<float>()[i])
          << name << "[" << i << "]";
    }
  }

  RunDir a = read_run_dir(first);
  RunDir b = read_run_dir(second);
  for (size_t s = 0; s < a.steps.size(); ++s) {
    EXPECT_EQ(a.steps[s].loss, b.steps[s].loss) << "step " << s;
    EXPECT_EQ(a.steps[s].replica_losses, b.steps[s].replica_losses) << "step " << s;
    EXPECT_EQ(a.steps[s].grad_norm, b.steps[s].grad_norm) << "step " << s;
    EXPECT_EQ(a.steps[s].param_norm, b.steps[s].param_norm) << "step " << s;
  }
  for (int64_t step : {0, 19}) {
    NamedTensors x = read_step_tensors(first, step);
    NamedTensors y = read_step_tensors(second, step);
    for (const auto& [name, tensor] : x) EXPECT_TRUE(tensor.bytes == y.at(name).bytes) << name;
  }
}

}  // namespace
}  // namespace parity::engine_trainer
