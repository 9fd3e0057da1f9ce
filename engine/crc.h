/*
 * crc.h — CRC32C (Castagnoli), the checksum of records, hint files and
 * control files. Backed by ISA-L's crc32_iscsi (SSE4.2/PCLMUL when the CPU
 * has them, table-driven otherwise).
 */
#ifndef KV_CRC_H
#define KV_CRC_H

#include <stddef.h>
#include <stdint.h>

#define CRC32C_INIT 0xffffffffu

/* Extends a running CRC; start from CRC32C_INIT and finish with crc32c_final. */
uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t len);

static inline uint32_t crc32c_final(uint32_t crc)
{
	return ~crc;
}

/* CRC32C of one buffer: crc32c("123456789") == 0xe3069283. */
uint32_t crc32c(const void *buf, size_t len);

#endif
