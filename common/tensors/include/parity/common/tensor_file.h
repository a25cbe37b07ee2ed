// Tensor files: safetensors (https://github.com/huggingface/safetensors, format described in
// its README), NumPy .npy (format 1.0-3.0, numpy/lib/format.py) and .npz archives of .npy
// files. Every reader validates the whole header before touching data and throws InputError
// naming the file, the tensor and the problem; nothing is read out of bounds.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

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
// An .npy file's bytes already in memory; messages name them as `origin`
// ("'weights.npz' member 'dense0.npy'").
HostTensor parse_npy(std::string_view bytes, const std::string& origin);

// NumPy .npz (numpy/lib/npyio.py): a zip archive of .npy members, stored (np.savez) or deflated
// (np.savez_compressed), named as np.load names them: the member name without ".npy". Every
// member's CRC-32 is checked; a member that is not an .npy file, a damaged archive or member,
// and a member larger than its compressed size can explain are refused with the archive, the
// member and the fix.
NamedTensors read_npz(const std::filesystem::path& path);

}  // namespace parity
