// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial and final value ~0, as RFC 3720
// §B.4 defines it for iSCSI), and the masked form TFRecord files store: the CRC rotated right by
// 15 bits plus 0xa282ead8 (tensorboard/summary/writer/record_writer.py, masked_crc32c), so
// that a CRC of data that itself holds CRCs is not easily confused with them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace parity::interop {

uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace parity::interop
