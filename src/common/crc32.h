/* crc32: the IEEE 802.3 CRC (as zlib's crc32), to checksum files we write. */
#ifndef KILN_CRC32_H
#define KILN_CRC32_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32_update(uint32_t crc, const void *data, size_t len);
static inline uint32_t crc32(const void *data, size_t len) { return crc32_update(0, data, len); }

#endif
