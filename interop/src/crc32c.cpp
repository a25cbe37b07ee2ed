#include "parity/interop/crc32c.h"

#include <array>

namespace parity::interop {
namespace {

// One table of the byte-at-a-time algorithm: entry b is the CRC register after shifting the
// byte b through eight reflected steps.
std::array<uint32_t, 256> make_table() {
  constexpr uint32_t kPolynomial = 0x82F63B78u;
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t value = b;
    for (int bit = 0; bit < 8; ++bit) value = (value >> 1) ^ ((value & 1u) ? kPolynomial : 0u);
    table[b] = value;
  }
  return table;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = make_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace parity::interop
