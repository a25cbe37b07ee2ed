// Content digests used in run directories (sample ids of a step, parameter replicas) and case
// hashes: 64-bit FNV-1a, printed as 16 hex digits. Not cryptographic; it identifies content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "parity/common/host_tensor.h"

namespace parity {

class Fnv1a64 {
 public:
  Fnv1a64& update(const void* data, size_t num_bytes);
  Fnv1a64& update(std::string_view text) { return update(text.data(), text.size()); }
  uint64_t value() const { return state_; }
  std::string hex() const;

 private:
  uint64_t state_ = 14695981039346656037ull;
};

// Digest of named tensors: each name, then its bytes, in name order. Both producers record
// each replica's parameters with it, so equal digests mean bit-identical replicas across
// engines too.
uint64_t digest_named_tensors(const NamedTensors& tensors);

// Digest of a list of sample ids as little-endian int64 values.
std::string digest_sample_ids(const std::vector<int64_t>& ids);
// The same digest of the ids sorted: equal for the same samples in any order or assignment to
// replicas (a step on 4 replicas of 128 and one on 8 of 64 train the same global batch).
std::string digest_sample_set(std::vector<int64_t> ids);
// How many of the ids repeat an id earlier in the list.
int64_t count_duplicates(std::vector<int64_t> ids);

}  // namespace parity
