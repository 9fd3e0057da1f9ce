/*
 * record.h — the log record: a fixed 48-byte little-endian header, the key,
 * the value. docs/FORMAT.md has the byte layout.
 *
 * Invariants:
 *   1. crc covers every byte after the crc field: header bytes 4..47, key, value,
 *      XORed with the segment's seed (kv_stor_seg.crc_seed: 0 on files, so
 *      a record's crc is its plain CRC32C there; on a device, one per use of
 *      an extent, so bytes a previous use left never pass for records).
 *   2. A header is trusted only after rec_check_header() accepted its type and
 *      lengths against the limits and the bytes left in the segment, and the
 *      whole record only after rec_verify() matched its crc.
 *   3. prev_seg == 0 means "no older version on disk".
 */
#ifndef KV_RECORD_H
#define KV_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REC_HEADER_SIZE 48u

enum rec_type {
	REC_PUT = 1,
	REC_DELETE = 2,
	/* A blob's descriptor: a put in every respect (version, chain, expiry)
	 * whose value names the blob's chunks (blob.h). Never compressed. */
	REC_BLOB = 3,
	/* A chunk of a blob: the blob's key, the chunk's bytes (compressed like
	 * a value), version 0, no expiry, no previous version. Never indexed:
	 * reached only through a descriptor naming its location. */
	REC_CHUNK = 4,
	/* A sync mark: no key, an 8-byte value, the offset in its segment up
	 * to which the segment was durable (fdatasync'ed) before the mark was
	 * written; version 0, no flags. Never indexed (see segment.h). */
	REC_SYNC = 5,
};

/* A record that carries a key: put, delete, blob descriptor, blob chunk
 * (every type but the sync mark). */
static inline bool rec_type_keyed(unsigned type)
{
	return type >= REC_PUT && type <= REC_CHUNK;
}

#define REC_SYNC_SIZE (REC_HEADER_SIZE + 8u)
/* A descriptor's fixed part, before its chunk locations (blob.h). */
#define BLOB_DESC_HEAD 32u

enum {
	REC_F_BATCH_MORE = 1u << 0,  /* more records of the same atomic batch follow */
	REC_F_HISTORY_CUT = 1u << 1, /* older versions of this key were dropped by merge */
	REC_F_CODEC_MASK = 0xf0u,    /* value codec: 0 = raw, 1 = lz4, 2 = zstd (codec.h) */
};
#define REC_F_CODEC_SHIFT 4

struct rec_header {
	uint32_t crc;
	uint8_t type;
	uint8_t flags;
	uint32_t key_len;
	uint32_t value_len;
	uint64_t version;
	uint64_t timestamp_ms;
	uint64_t expiry_ms; /* 0 = none */
	uint32_t prev_seg;  /* 0 = none */
	uint32_t prev_off;
};

/* The codec of a record's value (enum kv_codec). */
static inline unsigned rec_codec(const struct rec_header *h)
{
	return (h->flags & REC_F_CODEC_MASK) >> REC_F_CODEC_SHIFT;
}

static inline uint64_t rec_size(uint64_t key_len, uint64_t value_len)
{
	return REC_HEADER_SIZE + key_len + value_len;
}

/* Writes header, key and value to dst (rec_size bytes) and fills in the crc
 * of a record of a segment whose seed is seed (invariant 1). */
void rec_encode(uint8_t *dst, const struct rec_header *h, const void *key, const void *value,
                uint32_t seed);

/* Parses the 48 header bytes without judging them. */
void rec_decode_header(const uint8_t *src, struct rec_header *ret);

/* 0 when the header's type and lengths are plausible: type known, 1 ≤ key_len
 * ≤ max_key, value_len ≤ max_value, a delete carries no value, the value
 * codec is known (and 0 for a delete and a descriptor), a version ≥ 1,
 * and the whole record fits in `avail` bytes; a sync mark: no key, an 8-byte
 * value, version 0, no flags; a chunk: a value, version 0, no expiry, no
 * previous version. KV_ECORRUPT otherwise. */
int rec_check_header(const struct rec_header *h, uint32_t max_key, uint32_t max_value,
                     uint64_t avail);

/* 0 when buf (a whole record of rec_size bytes) matches its crc, read from a
 * segment whose seed is seed. */
int rec_verify(const uint8_t *buf, size_t len, uint32_t seed);

/* CRC of a record given in two pieces (header+key, value), as stored. */
uint32_t rec_crc2(const uint8_t *head, size_t head_len, const uint8_t *value, size_t value_len);

#endif
