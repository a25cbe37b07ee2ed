#include "programs/checkpoint.h"

#include <fmt/format.h>

#include <cstring>

#include "parity/common/error.h"
#include "parity/common/tensor_file.h"

namespace parity::engine_trainer {
namespace {

constexpr const char* kFormat = "parity-checkpoint";

DType host_dtype(pe::DType dtype) {
  switch (dtype) {
    case pe::DType::f32:
      return DType::F32;
    case pe::DType::f64:
      return DType::F64;
    case pe::DType::i32:
      return DType::I32;
    default:
      throw InternalError(std::string("checkpoint leaf of dtype ") + pe::dtype_name(dtype));
  }
}

// The leaf's bytes as they are, so that a restore is bit for bit.
HostTensor to_host(const pe::Array& leaf) {
  HostTensor tensor =
      HostTensor::zeros(host_dtype(leaf.dtype()), Shape(leaf.shape().begin(), leaf.shape().end()));
  if (leaf.dtype() == pe::DType::f32) {
    const std::vector<float> values = leaf.to_floats();
    std::memcpy(tensor.bytes.data(), values.data(), tensor.num_bytes());
  } else if (leaf.dtype() == pe::DType::f64) {
    const std::vector<double> values = leaf.to_doubles();
    std::memcpy(tensor.bytes.data(), values.data(), tensor.num_bytes());
  } else {
    const std::vector<int64_t> wide = leaf.to_ints();
    const std::vector<int32_t> values(wide.begin(), wide.end());
    std::memcpy(tensor.bytes.data(), values.data(), tensor.num_bytes());
  }
  return tensor;
}

pe::Array to_engine(const HostTensor& tensor) {
  const pe::Shape shape(tensor.shape.begin(), tensor.shape.end());
  if (tensor.dtype == DType::F32) {
    std::vector<float> values(tensor.num_elements());
    std::memcpy(values.data(), tensor.bytes.data(), tensor.num_bytes());
    return pe::Array::from_floats(shape, values);
  }
  if (tensor.dtype == DType::F64) {
    std::vector<double> values(tensor.num_elements());
    std::memcpy(values.data(), tensor.bytes.data(), tensor.num_bytes());
    return pe::Array::from_doubles(shape, values);
  }
  std::vector<int32_t> values(tensor.num_elements());
  std::memcpy(values.data(), tensor.bytes.data(), tensor.num_bytes());
  return pe::Array::from_ints(shape, values);
}

void add_tree(const std::string& prefix, const pe::Tree& tree, NamedTensors& tensors) {
  const std::vector<pe::Array> leaves = tree.leaves();
  const std::vector<std::string> paths = tree.leaf_paths();
  for (size_t i = 0; i < leaves.size(); ++i) {
    tensors.emplace(prefix + paths[i], to_host(leaves[i]));
  }
}

pe::Tree read_tree(const std::filesystem::path& path, const std::string& prefix,
                   const pe::Tree& like, const NamedTensors& tensors) {
  const std::vector<pe::Array> like_leaves = like.leaves();
  const std::vector<std::string> paths = like.leaf_paths();
  std::vector<pe::Array> leaves;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string name = prefix + paths[i];
    const auto found = tensors.find(name);
    if (found == tensors.end()) {
      throw InputError(
          fmt::format("{}: checkpoint has no tensor '{}'; it was saved from another "
                      "model or optimizer than this case's",
                      path.string(), name));
    }
    const pe::Array& expected = like_leaves[i];
    const Shape expected_shape(expected.shape().begin(), expected.shape().end());
    if (found->second.dtype != host_dtype(expected.dtype()) ||
        found->second.shape != expected_shape) {
      throw InputError(fmt::format(
          "{}: tensor '{}' is {} {} but this case needs {} {}; the checkpoint was saved from "
          "another model, optimizer or dtype",
          path.string(), name, dtype_name(found->second.dtype),
          shape_to_string(found->second.shape), dtype_name(host_dtype(expected.dtype())),
          shape_to_string(expected_shape)));
    }
    leaves.push_back(to_engine(found->second));
  }
  return like.unflatten(leaves);
}

int64_t metadata_integer(const std::filesystem::path& path,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& key) {
  const auto found = metadata.find(key);
  try {
    if (found != metadata.end()) return std::stoll(found->second);
  } catch (const std::exception&) {
  }
  throw InputError(
      fmt::format("{}: checkpoint metadata '{}' is missing or not an integer", path.string(), key));
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  NamedTensors tensors;
  add_tree("params/", checkpoint.params, tensors);
  add_tree("opt_state/", checkpoint.opt_state, tensors);
  std::filesystem::create_directories(path.parent_path());
  write_safetensors(path, tensors,
                    {{"format", kFormat},
                     {"schema_version", "1"},
                     {"step", std::to_string(checkpoint.step)},
                     {"device_count", std::to_string(checkpoint.device_count)},
                     {"process_index", "0"},
                     {"process_count", "1"}});
}

Checkpoint load_checkpoint(const std::filesystem::path& path, const pe::Tree& params_like,
                           const pe::Tree& state_like) {
  const SafetensorsFile file = read_safetensors(path);
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kFormat) {
    throw InputError(fmt::format("{}: not a parity checkpoint (metadata format is not \"{}\")",
                                 path.string(), kFormat));
  }
  Checkpoint checkpoint;
  checkpoint.step = metadata_integer(path, file.metadata, "step");
  checkpoint.device_count = metadata_integer(path, file.metadata, "device_count");
  checkpoint.params = read_tree(path, "params/", params_like, file.tensors);
  checkpoint.opt_state = read_tree(path, "opt_state/", state_like, file.tensors);
  return checkpoint;
}

}  // namespace parity::engine_trainer
