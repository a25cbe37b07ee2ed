// A case's initial parameters, made by whichever library owns its init.scheme: "torch" by
// ddp_ref (LibTorch's own constructors, ddp_ref::torch_init_params), the JAX schemes by common
// (init_model_params). Every command that starts from a case's initial parameters takes them
// from here, so a scheme reaches every command alike.
#pragma once

#include <filesystem>

#include "parity/common/case_spec.h"
#include "parity/common/host_tensor.h"

namespace parity::cli {

// Canonical names, Flax's layout, F32.
NamedTensors make_init_params(const CaseSpec& spec);

// Writes make_init_params(spec) to `path` (safetensors), its metadata naming the case, scheme,
// seed and scale it was made from.
void write_init_file(const std::filesystem::path& path, const CaseSpec& spec);

// The engine's initial parameters: `reference_init`, the file the reference producer starts
// from (made from `reference`), unless the engine's case initialises otherwise (its
// scenario.engine_overrides set [init], as M1's port keeps Flax's initialisers where the
// PyTorch job kept torch's); then its own, written to `engine_init`. Both producers start from
// one file whenever the initialisation is not the difference under test.
std::filesystem::path engine_init_file(const CaseSpec& reference, const CaseSpec& engine,
                                       const std::filesystem::path& reference_init,
                                       const std::filesystem::path& engine_init);

}  // namespace parity::cli
