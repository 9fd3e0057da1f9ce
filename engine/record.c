/* record.c — encode, decode and check log records. */
#include "record.h"

#include "crc.h"
#include "endian_util.h"
#include "kvengine.h"

#include <string.h>

static void put_header(uint8_t *p, const struct rec_header *h)
{
	p[4] = h->type;
	p[5] = h->flags;
	put_le16(p + 6, 0);
	put_le32(p + 8, h->key_len);
	put_le32(p + 12, h->value_len);
	put_le64(p + 16, h->version);
	put_le64(p + 24, h->timestamp_ms);
	put_le64(p + 32, h->expiry_ms);
	put_le32(p + 40, h->prev_seg);
	put_le32(p + 44, h->prev_off);
}

void rec_encode(uint8_t *dst, const struct rec_header *h, const void *key, const void *value,
                uint32_t seed)
{
	put_header(dst, h);
	/* key and value may already be in place (re-encoding a record) */
	if (h->key_len && dst + REC_HEADER_SIZE != (const uint8_t *)key)
		memcpy(dst + REC_HEADER_SIZE, key, h->key_len);
	if (h->value_len && dst + REC_HEADER_SIZE + h->key_len != (const uint8_t *)value)
		memcpy(dst + REC_HEADER_SIZE + h->key_len, value, h->value_len);
	put_le32(dst, crc32c(dst + 4, rec_size(h->key_len, h->value_len) - 4) ^ seed);
}

void rec_decode_header(const uint8_t *p, struct rec_header *ret)
{
	ret->crc = get_le32(p);
	ret->type = p[4];
	ret->flags = p[5];
	ret->key_len = get_le32(p + 8);
	ret->value_len = get_le32(p + 12);
	ret->version = get_le64(p + 16);
	ret->timestamp_ms = get_le64(p + 24);
	ret->expiry_ms = get_le64(p + 32);
	ret->prev_seg = get_le32(p + 40);
	ret->prev_off = get_le32(p + 44);
}

int rec_check_header(const struct rec_header *h, uint32_t max_key, uint32_t max_value,
                     uint64_t avail)
{
	if (h->type == REC_SYNC)
		return h->key_len == 0 && h->value_len == 8 && h->version == 0 && h->flags == 0 &&
		               REC_SYNC_SIZE <= avail
		           ? 0
		           : KV_ECORRUPT;
	if (!rec_type_keyed(h->type))
		return KV_ECORRUPT;
	if (h->key_len == 0 || h->key_len > max_key)
		return KV_ECORRUPT;
	if (h->value_len > max_value)
		return KV_ECORRUPT;
	if (h->type == REC_DELETE && (h->value_len != 0 || rec_codec(h) != 0))
		return KV_ECORRUPT;
	if (rec_codec(h) > KV_CODEC_ZSTD)
		return KV_ECORRUPT;
	if (h->type == REC_BLOB && (h->value_len < BLOB_DESC_HEAD || rec_codec(h) != 0))
		return KV_ECORRUPT;
	if (h->type == REC_CHUNK) {
		if (h->version != 0 || h->value_len == 0 || h->expiry_ms != 0 || h->prev_seg != 0 ||
		    h->prev_off != 0)
			return KV_ECORRUPT;
	} else if (h->version == 0) {
		return KV_ECORRUPT;
	}
	if (rec_size(h->key_len, h->value_len) > avail)
		return KV_ECORRUPT;
	return 0;
}

int rec_verify(const uint8_t *buf, size_t len, uint32_t seed)
{
	if (len < REC_HEADER_SIZE)
		return KV_ECORRUPT;
	return (crc32c(buf + 4, len - 4) ^ seed) == get_le32(buf) ? 0 : KV_ECORRUPT;
}

uint32_t rec_crc2(const uint8_t *head, size_t head_len, const uint8_t *value, size_t value_len)
{
	uint32_t c = crc32c_extend(CRC32C_INIT, head + 4, head_len - 4);
	if (value_len)
		c = crc32c_extend(c, value, value_len);
	return crc32c_final(c);
}
