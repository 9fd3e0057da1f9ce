/*
 * codec.h — value codecs: how a record's value is stored when its tenant
 * compresses (docs/FORMAT.md "Record", "Compressed values").
 *
 * A compressed value is stored as a 4-byte little-endian logical length
 * followed by the codec's output (an LZ4 block; a zstd frame). The codec is
 * in the record's flags (REC_F_CODEC_MASK); 0 means the bytes are the value.
 *
 * Invariants:
 *   1. A value is stored compressed only when that is shorter than the value
 *      itself (codec_compress returns 0 otherwise and the caller stores it
 *      raw), so a stored value is never longer than the logical one.
 *   2. A stored value is trusted only after its record's crc matched; even
 *      then codec_decompress checks every length and answers KV_ECORRUPT,
 *      never reads or writes out of bounds, when the bytes do not decode to
 *      exactly the logical length they announce.
 *
 * Threads: codec_compress uses a context owned by one thread (the write
 * path's driver); codec_decompress may be called from any thread.
 */
#ifndef KV_CODEC_H
#define KV_CODEC_H

#include "kvengine.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CODEC_PREFIX    4u  /* the logical length before the codec's output */
#define CODEC_MIN_VALUE 64u /* shorter values are stored raw without trying */

/* The compression state of one writer; zero-initialised means "none yet". */
struct codec_ctx {
	void *zstd; /* ZSTD_CCtx, made on first use */
};

void codec_ctx_release(struct codec_ctx *c);

/* Whether the flags' codec is one this build reads (0, 1 or 2). */
static inline bool codec_known(unsigned codec)
{
	return codec <= KV_CODEC_ZSTD;
}

/* Whether level is valid for codec (0 always: the codec's default). */
bool codec_level_valid(enum kv_codec codec, int level);

/* Compresses the len bytes at src into dst as stored (prefix and output),
 * using at most cap bytes of dst. Returns the stored length when it is
 * shorter than len, or 0: store the value raw (too short to try, did not
 * shrink, or the codec failed). */
size_t codec_compress(struct codec_ctx *c, enum kv_codec codec, int level, const void *src,
                      size_t len, uint8_t *dst, size_t cap);

/* Decodes a stored value of codec (1 or 2): 0 and a malloc'ed buffer with the
 * logical value in *ret_buf (at least 1 byte allocated) and its length in
 * *ret_len; KV_ECORRUPT when the codec is unknown, the logical length is
 * above max_len, or the bytes do not decode to exactly that length;
 * -ENOMEM. */
int codec_decompress(unsigned codec, const uint8_t *src, size_t len, uint32_t max_len,
                     uint8_t **ret_buf, size_t *ret_len);

/* "none", "lz4", "zstd" (NULL for anything else). */
const char *codec_name(enum kv_codec codec);

#endif
