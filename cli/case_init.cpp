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

}  // namespace parity::cli
