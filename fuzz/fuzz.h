/*
 * fuzz.h — what the libFuzzer targets in fuzz/ share: an invariant check
 * that holds with or without NDEBUG, little-endian helpers, a CRC32C of our
 * own (so a record or hint is judged by code other than the engine's), the
 * options-byte input of the file-parser targets, and per-input accounting of
 * heap allocations through the sanitizer hooks.
 *
 * Each target is one file, fuzz_<name>.c, that includes this header once.
 * Targets are single-threaded; the state below is per process.
 */
#ifndef KV_FUZZ_H
#define KV_FUZZ_H

#include <sanitizer/allocator_interface.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A broken invariant is a bug: say which, then abort so libFuzzer keeps the
 * input as a crash artifact. */
#define FZ_CHECK(cond)                                                                     \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
			        #cond);                                                    \
			abort();                                                           \
		}                                                                          \
	} while (0)

static inline uint32_t fz_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fz_le64(const uint8_t *p)
{
	return (uint64_t)fz_le32(p) | (uint64_t)fz_le32(p + 4) << 32;
}

static inline void fz_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fz_put_le64(uint8_t *p, uint64_t v)
{
	fz_put_le32(p, (uint32_t)v);
	fz_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven. */
static inline uint32_t fz_crc32c(const uint8_t *p, size_t n)
{
	static uint32_t table[256];
	static bool ready;
	uint32_t c = 0xffffffffu;

	if (!ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t x = i;
			for (int k = 0; k < 8; k++)
				x = x & 1 ? (x >> 1) ^ 0x82f63b78u : x >> 1;
			table[i] = x;
		}
		ready = true;
	}
	for (size_t i = 0; i < n; i++)
		c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/*
 * The input of a file-parser target (fuzz_manifest, fuzz_commit): one byte of
 * options, then the file. fz_file_input returns a malloc'd copy of the file
 * (*ret_len bytes), with what the options ask written over it:
 *   FZ_OPT_MAGIC    the 8-byte magic and the u32 version at offset 8 (when
 *                   the file has 12 bytes or more), so mutations get past them
 *   FZ_OPT_FIX_CRC  the trailing CRC32C recomputed (when it has 4 bytes or
 *                   more), so mutations reach the counts
 * NULL, and *ret_len untouched, for an empty input (no options byte). The
 * copy is made before fz_alloc_begin: it is not the parser's memory.
 */
#define FZ_OPT_MAGIC   (1u << 0)
#define FZ_OPT_FIX_CRC (1u << 1)

static inline uint8_t *fz_file_input(const uint8_t *data, size_t size, const char magic[8],
                                     uint32_t version, size_t *ret_len)
{
	uint8_t *buf;
	size_t len;

	if (size < 1)
		return NULL;
	len = size - 1;
	buf = malloc(len ? len : 1);
	FZ_CHECK(buf != NULL);
	memcpy(buf, data + 1, len);
	if ((data[0] & FZ_OPT_MAGIC) && len >= 12) {
		memcpy(buf, magic, 8);
		fz_put_le32(buf + 8, version);
	}
	if ((data[0] & FZ_OPT_FIX_CRC) && len >= 4)
		fz_put_le32(buf + len - 4, fz_crc32c(buf, len - 4));
	*ret_len = len;
	return buf;
}

/*
 * Allocation accounting: between fz_alloc_begin() and fz_alloc_end(), every
 * byte malloc'd (calloc'd, realloc'd) by anyone counts. A parser that asks for
 * memory in proportion to what a length field claims rather than to the
 * bytes it was given shows up here long before -rss_limit_mb notices.
 */
static __attribute__((unused)) struct {
	bool installed, armed;
	int paused;     /* fz_alloc_pause depth */
	size_t bytes;   /* allocated since fz_alloc_begin */
	size_t largest; /* the largest single allocation */
} fz_alloc;

static inline void fz_malloc_hook(const volatile void *p, size_t size)
{
	(void)p;
	if (!fz_alloc.armed || fz_alloc.paused)
		return;
	fz_alloc.bytes += size;
	if (size > fz_alloc.largest)
		fz_alloc.largest = size;
}

static inline void fz_free_hook(const volatile void *p)
{
	(void)p;
}

static inline void fz_alloc_begin(void)
{
	if (!fz_alloc.installed) {
		__sanitizer_install_malloc_and_free_hooks(fz_malloc_hook, fz_free_hook);
		fz_alloc.installed = true;
	}
	fz_alloc.bytes = 0;
	fz_alloc.largest = 0;
	fz_alloc.armed = true;
}

/* Stops counting and returns the bytes allocated since fz_alloc_begin. */
static inline size_t fz_alloc_end(void)
{
	fz_alloc.armed = false;
	return fz_alloc.bytes;
}

/* Around the harness's own allocations, which are not the parser's. */
static inline void fz_alloc_pause(void)
{
	fz_alloc.paused++;
}

static inline void fz_alloc_resume(void)
{
	fz_alloc.paused--;
}

/* With KVD_FUZZ_STATS=1 in the environment, reports each new largest ratio
 * of allocated bytes to input bytes plus 1 KiB (for choosing the bounds);
 * with KVD_FUZZ_STATS=2, every input. */
static inline void fz_alloc_report(const char *what, size_t bytes, size_t input_len)
{
	static double worst;
	static int verbose = -1;
	double r = (double)bytes / (double)(input_len + 1024);

	if (verbose < 0)
		verbose = getenv("KVD_FUZZ_STATS") ? atoi(getenv("KVD_FUZZ_STATS")) : 0;
	if ((verbose == 1 && r > worst * 1.1) || verbose == 2) {
		if (r > worst)
			worst = r;
		fprintf(stderr, "[%s] allocated %zu bytes for %zu input bytes (%.1fx of input+1K)\n",
		        what, bytes, input_len, r);
	}
}

#endif
