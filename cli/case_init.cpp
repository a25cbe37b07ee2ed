#include "case_init.h"

#include <fmt/format.h>

#include "parity/common/init_params.h"
#include "parity/common/tensor_file.h"
#include "parity/ddp_ref/ddp_ref.h"

namespace parity::cli {

NamedTensors make_init_params(const CaseSpec& spec) {
  if (spec.init.scheme == "torch") return ddp_ref::torch_init_params(spec);
  return init_model_params(spec);
}

void write_init_file(const std::filesystem::path& path, const CaseSpec& spec) {
  write_safetensors(path, make_init_params(spec),
                    {{"case", spec.name},
                     {"scheme", spec.init.scheme},
                     {"seed", std::to_string(spec.init.seed)},
                     {"scale", fmt::format("{}", spec.init.scale)}});
}

std::filesystem::path engine_init_file(const CaseSpec& reference, const CaseSpec& engine,
                                       const std::filesystem::path& reference_init,
                                       const std::filesystem::path& engine_init) {
  if (engine.init == reference.init) return reference_init;
  write_init_file(engine_init, engine);
  return engine_init;
}

}  // namespace parity::cli
