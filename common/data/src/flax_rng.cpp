#include "parity/common/flax_rng.h"

#include <nettle/sha1.h>

namespace parity {
namespace {

// Python's int.to_bytes((x.bit_length() + 7) // 8, "big"): no leading zero bytes, none for 0.
std::string big_endian_bytes(uint32_t value) {
  std::string bytes;
  for (; value != 0; value >>= 8) bytes.insert(bytes.begin(), static_cast<char>(value & 0xFF));
  return bytes;
}

}  // namespace

uint32_t flax_make_rng_data(const std::vector<std::string>& module_path, uint32_t count) {
  sha1_ctx context;
  sha1_init(&context);
  const auto update = [&context](const std::string& bytes) {
    sha1_update(&context, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
  };
  for (const std::string& name : module_path) update(name);  // str: its UTF-8 bytes
  update(big_endian_bytes(count));
  uint8_t digest[SHA1_DIGEST_SIZE];
  sha1_digest(&context, SHA1_DIGEST_SIZE, digest);
  return (uint32_t{digest[0]} << 24) | (uint32_t{digest[1]} << 16) | (uint32_t{digest[2]} << 8) |
         uint32_t{digest[3]};
}

}  // namespace parity
