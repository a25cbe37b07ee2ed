// The RNG check's derivation part on runs the engine recorded (`parity pmap` on a small dropout
// model, 4 devices, 3 steps): under each of the nine [rng] derivations, the faulty ones (none)
// included, every recorded key is the one the case derives. The engine computes its keys inside
// the pmapped step (train_step.cpp, layer_model.cpp), the check with the host threefry
// (DropoutKeys), so the two agree only if both follow JAX.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "command.h"
#include "parity/compare/compare.h"
#include "result_lookup.h"
#include "test_files.h"

namespace parity::compare {
namespace {

using testing::figure;
using testing::find_check;
using ::testing::HasSubstr;
using ::testing::Not;

// Two dropout sites: Dropout_0 and Residual_0/Dropout_0.
const char* kCase =
    "[case]\nname = \"dropout-keys\"\n\n"
    "[model]\ninput = [784]\nlayers = [\n"
    "  { kind = \"dense\", features = 8 },\n"
    "  { kind = \"dropout\", rate = 0.5 },\n"
    "  { kind = \"residual\", layers = [ { kind = \"dense\", features = 8 },\n"
    "                                   { kind = \"dropout\", rate = 0.25 } ] },\n"
    "  { kind = \"dense\", features = 10 },\n]\n\n"
    "[data]\nper_replica_batch = 4\n\n[parallel]\nreplicas = 4\n\n"
    "[train]\nsteps = 3\noptimizer = \"sgd\"\nlr = 0.1\n\n[init]\nscheme = \"flax\"\n";

TEST(RngCheck, EngineKeysAreTheCasesDerivationUnderEveryPerStepAndPerDeviceOption) {
  testing::TempDir dir;
  const std::filesystem::path case_file = dir.path("dropout-keys.toml");
  testing::write_bytes(case_file, kCase);
  for (const char* per_step : {"fold_in", "split", "none"}) {
    for (const char* per_device : {"fold_in", "split", "none"}) {
      const std::string options = fmt::format(
          "--set rng.seed=3 --set rng.per_step={} --set rng.per_device={}", per_step, per_device);
      const std::filesystem::path run = dir.path(fmt::format("{}-{}", per_step, per_device));
      const testing::CommandResult trained = testing::run_command(
          fmt::format("{} pmap {} {} --quiet --out {}", PARITY_EXECUTABLE,
                      testing::shell_quote(case_file.string()), options,
                      testing::shell_quote(run.string())));
      ASSERT_EQ(trained.exit_code, 0) << options << "\n" << trained.output;

      const ComparisonResult result = compare_run_dirs(run, run, CompareOptions{});
      const Check& rng = find_check(result, "rng");
      EXPECT_EQ(figure(rng, "keys_recomputed_a"), 3 * 4 * 2) << options;
      EXPECT_EQ(figure(rng, "key_mismatches_a"), 0) << options << ": " << rng.summary;
      EXPECT_THAT(testing::all_details(rng), Not(HasSubstr("the recorded key is"))) << options;
      EXPECT_THAT(rng.summary, HasSubstr("all 24 of run A's recorded keys recomputed")) << options;
    }
  }
}

}  // namespace
}  // namespace parity::compare
