#include "rng_derivation.h"

#include <fmt/format.h>

#include <algorithm>

#include "parity/common/dropout_streams.h"
#include "parity/common/error.h"

namespace parity::compare {
namespace {

namespace pr = pmap_engine::random;

std::string describe(const RngSpec& rng) {
  return fmt::format("seed {}, per_step \"{}\", per_device \"{}\"", rng.seed, rng.per_step,
                     rng.per_device);
}

}  // namespace

KeyDerivation derive_recorded_keys(char label, const RunDir& run) {
  KeyDerivation result;
  const std::string name = fmt::format("run {} ({})", label, run.info.producer);
  const bool keyed = std::any_of(run.rng.begin(), run.rng.end(),
                                 [](const MaskDraw& draw) { return draw.key.has_value(); });
  if (!keyed) {
    result.skipped = name + " recorded no jax.random keys with its masks (a generator such as "
                            "torch's has none)";
    return result;
  }
  if (run.info.case_toml.empty()) {
    result.skipped = name + " has no case text in run.json to derive its keys from";
    return result;
  }
  CaseSpec spec;
  try {
    spec = case_from_text(run.info.case_toml, run.dir / "run.json (case.toml)");
  } catch (const InputError& error) {
    result.skipped = fmt::format("{}'s case text does not read as a case: {}", name, error.what());
    return result;
  }

  // The step keys in order from step 0: per_step = "split" carries a key through the loop.
  DropoutKeys keys(spec.rng);
  int64_t next_step = 0;
  pr::Key step_key{};
  for (const MaskDraw& draw : run.rng) {
    while (next_step <= draw.step) step_key = keys.next_step_key(next_step++);
    if (!draw.key) continue;
    const pr::Key expected = DropoutKeys::site_key(
        keys.device_key(step_key, draw.replica, run.info.replicas), draw.site);
    ++result.recomputed;
    if (*draw.key == RngKeyWords{expected.hi, expected.lo}) continue;
    ++result.mismatches;
    if (result.first_mismatch) continue;
    result.first_mismatch_step = draw.step;
    result.first_mismatch = fmt::format(
        "run {}: at step {}, replica {}, site {} the recorded key is [{}, {}], but the case's "
        "[rng] ({}) derives [{}, {}]",
        label, draw.step, draw.replica, draw.site, (*draw.key)[0], (*draw.key)[1],
        describe(spec.rng), expected.hi, expected.lo);
  }
  return result;
}

}  // namespace parity::compare
