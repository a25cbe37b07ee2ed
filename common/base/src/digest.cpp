// 64-bit FNV-1a (Fowler/Noll/Vo): for each byte, state ^= byte; state *= prime.
// Offset basis 14695981039346656037 and prime 1099511628211 are the published 64-bit
// parameters (http://www.isthe.com/chongo/tech/comp/fnv/). Overflow wraps modulo 2^64, which
// unsigned arithmetic gives us for free.
#include "parity/common/digest.h"

#include <algorithm>
#include <cstdio>

namespace parity {

namespace {
constexpr uint64_t kFnv64Prime = 1099511628211ull;
}  // namespace

Fnv1a64& Fnv1a64::update(const void* data, size_t num_bytes) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < num_bytes; ++i) {
    state_ ^= bytes[i];
    state_ *= kFnv64Prime;
  }
  return *this;
}

std::string Fnv1a64::hex() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(state_));
  return std::string(text, 16);
}

std::string digest_sample_ids(const std::vector<int64_t>& ids) {
  // Serialise explicitly as little-endian so the digest is the same on every host.
  Fnv1a64 digest;
  for (int64_t id : ids) {
    const auto value = static_cast<uint64_t>(id);
    unsigned char bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<unsigned char>(value >> (8 * b));
    digest.update(bytes, sizeof bytes);
  }
  return digest.hex();
}

std::string digest_sample_set(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return digest_sample_ids(ids);
}

int64_t count_duplicates(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<int64_t>(ids.end() - std::unique(ids.begin(), ids.end()));
}

uint64_t digest_named_tensors(const NamedTensors& tensors) {
  Fnv1a64 digest;
  for (const auto& [name, tensor] : tensors) {
    digest.update(name);
    digest.update(tensor.bytes.data(), tensor.bytes.size());
  }
  return digest.value();
}

}  // namespace parity
