/* crc.c — CRC32C through ISA-L. */
#include "crc.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	/* crc32_iscsi takes an int length. */
	while (len > 0) {
		int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;
		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return crc;
}

uint32_t crc32c(const void *buf, size_t len)
{
	return crc32c_final(crc32c_extend(CRC32C_INIT, buf, len));
}
