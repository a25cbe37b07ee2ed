#include "rng_import.h"

#include <fmt/format.h>

#include <algorithm>

#include "parity/common/dropout_streams.h"
#include "parity/common/error.h"

namespace parity::interop {

std::map<int64_t, std::vector<MaskDraw>> read_logged_draws(
    const std::filesystem::path& metrics_source, const CaseSpec& spec,
    const std::vector<int64_t>& steps) {
  const std::filesystem::path dir = std::filesystem::is_directory(metrics_source)
                                        ? metrics_source
                                        : metrics_source.parent_path();
  std::vector<MaskDraw> draws = read_rng_streams(dir, spec.parallel.replicas, steps, false);
  if (!draws.empty() && dropout_sites(spec.model).empty()) {
    throw InputError(fmt::format(
        "{}: holds dropout masks, but case {} has no dropout (no dropout layer with a rate above "
        "0), so they cannot be the masks of its run; import with --case naming the case the "
        "script trained (a model with dropout, e.g. mlp-fmnist-dropout), or move rng.jsonl out "
        "of {}",
        rng_streams_path(dir).string(), spec.name, dir.string()));
  }
  std::map<int64_t, std::vector<MaskDraw>> by_step;
  for (MaskDraw& draw : draws) {
    if (!std::binary_search(steps.begin(), steps.end(), draw.step)) {
      throw InputError(fmt::format(
          "{}: step {} has dropout draws, but {} logs no loss at step {}; log the masks at the "
          "steps whose metrics you log",
          rng_streams_path(dir).string(), draw.step, metrics_source.string(), draw.step));
    }
    by_step[draw.step].push_back(std::move(draw));
  }
  return by_step;
}

}  // namespace parity::interop
