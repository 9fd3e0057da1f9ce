/* codec.c — LZ4 and zstd compression of stored values (codec.h). */
#include "codec.h"

#include "endian_util.h"

#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define ZSTD_LEVEL_DEFAULT 3

/* A zstd decompression context per thread, made on the thread's first
 * zstd read and freed when the thread ends: a context is about 100 KiB
 * to set up, more than decoding a small value costs. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static bool dctx_key_ok;

static void dctx_free(void *p)
{
	ZSTD_freeDCtx(p);
}

static void dctx_key_make(void)
{
	dctx_key_ok = pthread_key_create(&dctx_key, dctx_free) == 0;
}

/* The calling thread's context, or NULL (then a one-off one is used). */
static ZSTD_DCtx *thread_dctx(void)
{
	ZSTD_DCtx *d;

	pthread_once(&dctx_once, dctx_key_make);
	if (!dctx_key_ok)
		return NULL;
	if ((d = pthread_getspecific(dctx_key)) == NULL && (d = ZSTD_createDCtx()) != NULL &&
	    pthread_setspecific(dctx_key, d) != 0) {
		ZSTD_freeDCtx(d);
		d = NULL;
	}
	return d;
}

void codec_ctx_release(struct codec_ctx *c)
{
	if (c == NULL)
		return;
	ZSTD_freeCCtx(c->zstd);
	c->zstd = NULL;
}

bool codec_level_valid(enum kv_codec codec, int level)
{
	switch (codec) {
	case KV_CODEC_NONE:
	case KV_CODEC_LZ4:
		return level == 0;
	case KV_CODEC_ZSTD:
		return level >= 0 && level <= ZSTD_maxCLevel();
	}
	return false;
}

const char *codec_name(enum kv_codec codec)
{
	switch (codec) {
	case KV_CODEC_NONE:
		return "none";
	case KV_CODEC_LZ4:
		return "lz4";
	case KV_CODEC_ZSTD:
		return "zstd";
	}
	return NULL;
}

size_t codec_compress(struct codec_ctx *c, enum kv_codec codec, int level, const void *src,
                      size_t len, uint8_t *dst, size_t cap)
{
	size_t room, out;

	if (codec == KV_CODEC_NONE || len < CODEC_MIN_VALUE || len > KV_VALUE_SIZE_MAX)
		return 0;
	/* the output must leave the stored value shorter than the value */
	if (cap > len - 1)
		cap = len - 1;
	if (cap <= CODEC_PREFIX)
		return 0;
	room = cap - CODEC_PREFIX;
	if (codec == KV_CODEC_LZ4) {
		int n = LZ4_compress_default(src, (char *)dst + CODEC_PREFIX, (int)len, (int)room);
		if (n <= 0)
			return 0;
		out = (size_t)n;
	} else if (codec == KV_CODEC_ZSTD) {
		if (c->zstd == NULL && (c->zstd = ZSTD_createCCtx()) == NULL)
			return 0;
		out = ZSTD_compressCCtx(c->zstd, dst + CODEC_PREFIX, room, src, len,
		                        level ? level : ZSTD_LEVEL_DEFAULT);
		if (ZSTD_isError(out))
			return 0; /* (dstSize_tooSmall: it did not shrink) */
	} else {
		return 0;
	}
	put_le32(dst, (uint32_t)len);
	return CODEC_PREFIX + out;
}

int codec_decompress(unsigned codec, const uint8_t *src, size_t len, uint32_t max_len,
                     uint8_t **ret_buf, size_t *ret_len)
{
	uint32_t logical;
	uint8_t *buf;
	size_t got;

	if (codec != KV_CODEC_LZ4 && codec != KV_CODEC_ZSTD)
		return KV_ECORRUPT;
	if (len < CODEC_PREFIX)
		return KV_ECORRUPT;
	logical = get_le32(src);
	/* a stored value is compressed only when that made it shorter */
	if (logical > max_len || logical <= len || logical > INT32_MAX)
		return KV_ECORRUPT;
	if ((buf = malloc(logical)) == NULL)
		return -ENOMEM;
	src += CODEC_PREFIX;
	len -= CODEC_PREFIX;
	if (codec == KV_CODEC_LZ4) {
		int n = len > INT32_MAX ? -1
		                        : LZ4_decompress_safe((const char *)src, (char *)buf,
		                                              (int)len, (int)logical);
		got = n < 0 ? SIZE_MAX : (size_t)n;
	} else {
		ZSTD_DCtx *d = thread_dctx();
		got = d != NULL ? ZSTD_decompressDCtx(d, buf, logical, src, len)
		                : ZSTD_decompress(buf, logical, src, len);
		if (ZSTD_isError(got))
			got = SIZE_MAX;
	}
	if (got != logical) {
		free(buf);
		return KV_ECORRUPT;
	}
	*ret_buf = buf;
	*ret_len = logical;
	return 0;
}

int kv_codec_parse(const char *s, size_t n, enum kv_codec *ret_codec, int *ret_level)
{
	enum kv_codec codec;
	size_t name_len = 0;
	int level = 0;

	while (name_len < n && s[name_len] != ':')
		name_len++;
	if (name_len == 4 && memcmp(s, "none", 4) == 0)
		codec = KV_CODEC_NONE;
	else if (name_len == 3 && memcmp(s, "lz4", 3) == 0)
		codec = KV_CODEC_LZ4;
	else if (name_len == 4 && memcmp(s, "zstd", 4) == 0)
		codec = KV_CODEC_ZSTD;
	else
		return -EINVAL;
	if (name_len < n) {
		size_t i = name_len + 1;
		if (codec != KV_CODEC_ZSTD || i == n || n - i > 2)
			return -EINVAL;
		for (; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -EINVAL;
			level = level * 10 + (s[i] - '0');
		}
		if (level == 0)
			return -EINVAL;
	}
	if (!codec_level_valid(codec, level))
		return -EINVAL;
	*ret_codec = codec;
	*ret_level = level;
	return 0;
}

int kv_codec_format(enum kv_codec codec, int level, char *buf, size_t cap)
{
	const char *name = codec_name(codec);
	int n;

	if (name == NULL || !codec_level_valid(codec, level))
		return -EINVAL;
	n = level ? snprintf(buf, cap, "%s:%d", name, level) : snprintf(buf, cap, "%s", name);
	return n < 0 || (size_t)n >= cap ? -ENOBUFS : 0;
}
