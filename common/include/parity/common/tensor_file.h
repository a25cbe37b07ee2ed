// Tensor files: safetensors (https://github.com/huggingface/safetensors, format described in
// its README) and NumPy .npy (format 1.0-3.0, numpy/lib/format.py). Every reader validates the
// whole header before touching data and throws InputError naming the file, the tensor and the
// problem; nothing is read out of bounds.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "parity/common/host_tensor.h"

namespace parity {

struct SafetensorsFile {
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" string map
};

// Writes atomically (temp file + rename).
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});
SafetensorsFile read_safetensors(const std::filesystem::path& path);

void write_npy(const std::filesystem::path& path, const HostTensor& tensor);
HostTensor read_npy(const std::filesystem::path& path);

}  // namespace parity
