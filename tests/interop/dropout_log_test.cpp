// The Python helpers' log_dropout (interop/python): the rng.jsonl lines they write for a keep
// mask go through `parity import metrics` into the run directory, where parity's C++ reader reads
// back the size, kept count, digest and prefix that parity's C++ summarise_mask
// (common/run_dir/src/rng_streams.cpp) gives for the same mask, and compare's RNG check judges them.
//
// The masks come from a formula both sides compute (kept() below); the JAX helper runs with
// NumPy arrays (JAX is not installable here) and logs keys derived in C++ by DropoutKeys for
// the case, which the RNG check recomputes; the torch helper runs 2 real gloo ranks and records
// its NCHW masks channels-last (Flax's layout), as ddp_ref does.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "parity/common/case_spec.h"
#include "parity/common/dropout_streams.h"
#include "parity/common/rng_streams.h"
#include "parity/common/run_dir.h"
#include "parity/compare/compare.h"
#include "python_helper_support.h"
#include "test_files.h"

namespace parity {
namespace {

namespace pr = pmap_engine::random;

// A case with dropout: masks are refused for a case without.
constexpr const char* kCase = "mlp-fmnist-dropout";
constexpr int64_t kSteps = 3;
constexpr int64_t kReplicas = 2;
constexpr double kRate = 0.1;

// Element i (row-major) of replica r's mask at step s: murmur3's 32-bit finaliser (fmix32) of
// i + 1000003 r + 100003 s, dropped when it is 0 mod 10, so replicas and steps draw independent
// looking masks that keep about 90%. The Python scripts compute the same on int64 arrays, taking
// the low 32 bits after each product.
bool kept(int64_t i, int64_t replica, int64_t step) {
  auto h = static_cast<uint32_t>(i + 1000003 * replica + 100003 * step);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h % 10 != 0;
}

constexpr const char* kMaskFormula = R"PY(
def kept(i, replica, step):  # kept() of dropout_log_test.cpp, on an int64 array i
    h = (i + 1000003 * replica + 100003 * step) & 0xFFFFFFFF
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h = h ^ (h >> 16)
    return h % 10 != 0
)PY";

// The JAX helper: masks of shape (replicas, 3, 2000), 6,000 elements each (more than the 4,096
// the prefix holds), with the keys in argv[2] (one [hi, lo] per step and replica).
constexpr const char* kJaxScript = R"PY(
import json, sys
import numpy as np
from parity_jax_log import JaxRunLogger

log_dir, keys = sys.argv[1], json.load(open(sys.argv[2]))
logger = JaxRunLogger(log_dir)
i = np.arange(3 * 2000, dtype=np.int64).reshape(3, 2000)
for step in range(3):
    masks = np.stack([kept(i, replica, step) for replica in range(2)])
    logger.log_dropout(step, "Dropout_0", masks, rate=0.1,
                       keys=np.array(keys[step], dtype=np.uint32))
    logger.log_step(step, params={"w": np.zeros(1)}, replica_losses=[1.0, 1.0], grad_norm=0.0)
logger.close()
)PY";

// The torch helper on 2 gloo ranks: each rank's NCHW mask (2, 3, 40, 40), 9,600 elements.
constexpr const char* kTorchScript = R"PY(
import os, socket, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from parity_torch_log import TorchRunLogger

def rank_main(rank, port, log_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    logger = TorchRunLogger(log_dir)
    model = torch.nn.Linear(2, 1)
    i = torch.arange(2 * 3 * 40 * 40, dtype=torch.int64).reshape(2, 3, 40, 40)
    for step in range(3):
        model.zero_grad()
        loss = model(torch.ones(1, 2)).sum()
        loss.backward()
        logger.log_dropout(step, "Dropout_0", kept(i, rank, step), rate=0.1)
        logger.log_step(step, model, loss)
    logger.close()
    dist.barrier()
    os._exit(0)  # not destroy_process_group: it can deadlock in torch 1.13 (parity_torch_log.py)

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(port, sys.argv[1]), nprocs=2)
)PY";

// The mask of kept() over `shape` at (replica, step), row-major; NCHW shapes optionally taken
// channels-last, element (n, h, w, c) of the result being (n, c, h, w) of the NCHW mask.
std::vector<uint8_t> mask(const std::vector<int64_t>& shape, int64_t replica, int64_t step,
                          bool channels_last) {
  int64_t size = 1;
  for (int64_t extent : shape) size *= extent;
  std::vector<uint8_t> out(static_cast<size_t>(size));
  if (!channels_last) {
    for (int64_t i = 0; i < size; ++i) out[static_cast<size_t>(i)] = kept(i, replica, step);
    return out;
  }
  const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
  size_t at = 0;
  for (int64_t ni = 0; ni < n; ++ni) {
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t wi = 0; wi < w; ++wi) {
        for (int64_t ci = 0; ci < c; ++ci) {
          out[at++] = kept(((ni * c + ci) * h + hi) * w + wi, replica, step);
        }
      }
    }
  }
  return out;
}

class DropoutLog : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::python_has_module("numpy"))
        << testing::python_executable()
        << " cannot import numpy; install python3-numpy (scripts/install-deps.sh) or point "
           "PARITY_PYTHON at an interpreter that has it";
  }

  // Runs `script` (after kMaskFormula) with `args`, then imports its log as a run of
  // kCase on 2 replicas.
  RunDir log_and_import(const std::string& script, const std::string& args) {
    testing::write_bytes(dir_.path("loop.py"), std::string(kMaskFormula) + script);
    const testing::CommandResult logged = testing::run_command(
        fmt::format("PYTHONPATH={} {} {} {} {}",
                    testing::shell_quote(testing::python_helpers_dir().string()),
                    testing::shell_quote(testing::python_executable()),
                    testing::shell_quote(dir_.path("loop.py").string()),
                    testing::shell_quote(dir_.path("log").string()), args),
        300);
    EXPECT_EQ(logged.exit_code, 0) << logged.output;
    const testing::CommandResult imported = testing::run_command(fmt::format(
        "{} import metrics {} --case {} --set parallel.replicas={} --map loss=loss --out {}",
        PARITY_EXECUTABLE, testing::shell_quote(dir_.path("log/metrics.jsonl").string()), kCase,
        kReplicas, testing::shell_quote(dir_.path("run").string())));
    EXPECT_EQ(imported.exit_code, 0) << imported.output;
    EXPECT_THAT(imported.output, ::testing::HasSubstr(fmt::format(
                                     "and {} dropout masks (rng.jsonl)", kSteps * kReplicas)));
    return read_run_dir(dir_.path("run"));
  }

  // Each imported draw is what summarise_mask makes of the same mask.
  static void expect_cpp_summaries(const RunDir& run, const std::vector<int64_t>& shape,
                                   bool channels_last) {
    ASSERT_EQ(run.rng.size(), static_cast<size_t>(kSteps * kReplicas));
    for (const MaskDraw& draw : run.rng) {
      SCOPED_TRACE(fmt::format("step {}, replica {}", draw.step, draw.replica));
      const MaskDraw expected =
          summarise_mask(draw.step, draw.replica, "Dropout_0", kRate,
                         mask(shape, draw.replica, draw.step, channels_last));
      EXPECT_EQ(draw.site, "Dropout_0");
      EXPECT_EQ(draw.rate, kRate);
      EXPECT_EQ(draw.size, expected.size);
      EXPECT_EQ(draw.kept, expected.kept);
      EXPECT_EQ(draw.digest, expected.digest);
      EXPECT_EQ(draw.prefix, expected.prefix);
    }
  }

  testing::TempDir dir_;
};

TEST_F(DropoutLog, JaxHelperMasksAndKeysImportAsTheCppWriterSummarisesThem) {
  // Each step's and replica's key as the case (its default [rng]) derives it.
  DropoutKeys keys(load_case(kCase).rng);
  nlohmann::json words = nlohmann::json::array();
  for (int64_t step = 0; step < kSteps; ++step) {
    const pr::Key step_key = keys.next_step_key(step);
    words.push_back(nlohmann::json::array());
    for (int64_t replica = 0; replica < kReplicas; ++replica) {
      const pr::Key key =
          DropoutKeys::site_key(keys.device_key(step_key, replica, kReplicas), "Dropout_0");
      words.back().push_back({key.hi, key.lo});
    }
  }
  testing::write_bytes(dir_.path("keys.json"), words.dump());
  const RunDir run =
      log_and_import(kJaxScript, testing::shell_quote(dir_.path("keys.json").string()));
  expect_cpp_summaries(run, {3, 2000}, false);
  for (const MaskDraw& draw : run.rng) {
    ASSERT_TRUE(draw.key.has_value());
    EXPECT_EQ(nlohmann::json({(*draw.key)[0], (*draw.key)[1]}),
              words[static_cast<size_t>(draw.step)][static_cast<size_t>(draw.replica)]);
  }

  // The RNG check judges the imported streams, keys recomputed from the case included.
  const compare::ComparisonResult result =
      compare::compare_run_dirs(dir_.path("run"), dir_.path("run"), compare::CompareOptions{});
  const compare::Check* rng = nullptr;
  for (const compare::Check& check : result.checks) {
    if (check.id == "rng") rng = &check;
  }
  ASSERT_NE(rng, nullptr);
  EXPECT_EQ(rng->status, compare::CheckStatus::kPass) << rng->summary;
  EXPECT_THAT(rng->summary, ::testing::HasSubstr(fmt::format(
                                "all {} of run A's recorded keys recomputed", kSteps * kReplicas)));
}

TEST_F(DropoutLog, TorchHelperMasksOfTwoRanksImportChannelsLastAsTheCppWriterSummarisesThem) {
  ASSERT_TRUE(testing::python_has_module("torch"))
      << testing::python_executable()
      << " cannot import torch; install python3-torch (scripts/install-deps.sh) or point "
         "PARITY_PYTHON at an interpreter that has it";
  const RunDir run = log_and_import(kTorchScript, "");
  expect_cpp_summaries(run, {2, 3, 40, 40}, true);
  for (const MaskDraw& draw : run.rng) EXPECT_FALSE(draw.key.has_value());  // torch: no keys
  // The layout matters: the same mask in NCHW order has another digest.
  EXPECT_NE(run.rng.front().digest,
            summarise_mask(0, 0, "Dropout_0", kRate, mask({2, 3, 40, 40}, 0, 0, false)).digest);
}

}  // namespace
}  // namespace parity
