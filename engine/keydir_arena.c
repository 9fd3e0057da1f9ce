/*
 * keydir_arena.c — the key directory's arena: chunks of memory, free lists
 * and the wilderness (keydir_arena.h has the handle layout).
 *
 * What it owns: the chunks of one directory and the free lists threaded
 * through them. It keeps keydir.c's invariant 6: every unit but unit 0 of
 * chunk 0 is in exactly one of a live object's block (keydir.c's), a free
 * block of at least KD_MIN_BLOCK units, or the wilderness (the untouched tail
 * of the newest chunk).
 *
 *   free block  u32 next free block of its class (0 ends); u32 size in units.
 *
 * Policy: free blocks sit on segregated lists (one class per unit count
 * below 64 units, four per power of two above). An allocation takes an exact
 * fit, else splits the smallest larger free block, else bumps the wilderness,
 * else opens a chunk of about 1/32 of the arena (1 KiB to 1 MiB), so a small
 * directory stays small and the unused tail stays a small share. Blocks are
 * not coalesced: a freed block is reused whole or split. keydir.c releases
 * the whole arena when the last key goes.
 *
 * Threads: none taken (keydir_arena.h).
 */
#include "keydir_arena.h"

#include "keydir.h" /* KD_ARENA_MAX */

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MIN_SHIFT   10 /* the first chunk is 1 KiB */
#define CHUNK_MAX_SHIFT   20 /* chunks grow with the arena up to 1 MiB */
#define CHUNK_SHARE_SHIFT 5  /* a new chunk is about 1/32 of the arena */
#define CHUNK_SLACK       64 /* chunks are 2^k - 64 bytes so malloc+mmap fill whole pages */
#define FIT_SCAN          16 /* blocks looked at in a mixed-size class before moving up */

/* keydir.h promises callers this bound; it is the arena's. */
_Static_assert(((uint64_t)KD_MAX_CHUNKS << CHUNK_MAX_SHIFT) == KD_ARENA_MAX,
               "KD_ARENA_MAX is KD_MAX_CHUNKS chunks of the largest size");

static unsigned size_class(uint32_t units)
{
	if (units < KD_NEXACT)
		return units;
	unsigned lg = 31 - (unsigned)__builtin_clz(units); /* >= 6 */
	unsigned sub = (units >> (lg - 2)) & 3;
	unsigned c = KD_NEXACT + (lg - 6) * 4 + sub;
	assert(c < KD_NCLASS);
	return c;
}

static void fl_push(struct kd_arena *a, uint32_t h, uint32_t units)
{
	assert(units >= KD_MIN_BLOCK);
	unsigned c = size_class(units);
	uint8_t *p = kd_arena_at(a, h);

	wr32(p, a->free_head[c]);
	wr32(p + 4, units);
	a->free_head[c] = h;
	a->free_map[c / 64] |= 1ull << (c % 64);
}

static void fl_unlink(struct kd_arena *a, unsigned c, uint8_t *prev, uint32_t h)
{
	uint32_t next = rd32(kd_arena_at(a, h));

	if (prev == NULL)
		a->free_head[c] = next;
	else
		wr32(prev, next);
	if (a->free_head[c] == 0)
		a->free_map[c / 64] &= ~(1ull << (c % 64));
}

/* Hands out u units from the front of free block h of s >= u units (already
 * unlinked): a rest of KD_MIN_BLOCK or more goes back on a free list, a smaller
 * one is handed out too, as slack. Returns the units handed out. */
static uint32_t take(struct kd_arena *a, uint32_t h, uint32_t s, uint32_t u)
{
	assert(s >= u);
	if (s - u < KD_MIN_BLOCK)
		return s;
	fl_push(a, h + u, s - u);
	return u;
}

/* First of the first FIT_SCAN blocks of class c with at least u units. */
static bool fl_fit(struct kd_arena *a, unsigned c, uint32_t u, uint32_t *ret_h, uint32_t *ret_units)
{
	uint8_t *prev = NULL;
	uint32_t h = a->free_head[c];

	for (int i = 0; h != 0 && i < FIT_SCAN; i++) {
		uint8_t *p = kd_arena_at(a, h);
		uint32_t s = rd32(p + 4);
		if (s >= u) {
			fl_unlink(a, c, prev, h);
			*ret_units = take(a, h, s, u);
			*ret_h = h;
			return true;
		}
		prev = p;
		h = rd32(p);
	}
	return false;
}

/* Lowest non-empty class >= c, or KD_NCLASS. */
static unsigned fl_next_class(const struct kd_arena *a, unsigned c)
{
	for (unsigned w = c / 64; w < KD_NCLASS / 64; w++) {
		uint64_t m = a->free_map[w];
		if (w == c / 64)
			m &= ~0ull << (c % 64);
		if (m)
			return w * 64 + (unsigned)__builtin_ctzll(m);
	}
	return KD_NCLASS;
}

static int arena_grow(struct kd_arena *a, uint32_t u)
{
	if (a->nchunks == KD_MAX_CHUNKS)
		return -ENOMEM;
	if (a->nchunks == a->chunk_cap) {
		uint32_t cap = a->chunk_cap ? a->chunk_cap * 2 : 8;
		uint8_t **t = realloc(a->chunks, cap * sizeof *t);
		if (t == NULL)
			return -ENOMEM;
		a->chunks = t;
		uint32_t *sz = realloc(a->sizes, cap * sizeof *sz);
		if (sz == NULL)
			return -ENOMEM;
		a->sizes = sz;
		a->chunk_cap = cap;
	}
	/* About 1/32 of what the arena holds: the unused tail of the newest
	 * chunk stays a small share of the memory at every size. */
	unsigned shift = CHUNK_MIN_SHIFT;
	while (shift < CHUNK_MAX_SHIFT &&
	       ((size_t)1 << (shift + 1 + CHUNK_SHARE_SHIFT)) <= a->bytes)
		shift++;
	uint32_t first = a->nchunks == 0 ? 1 : 0; /* unit 0 of chunk 0 is null */
	while ((((size_t)1 << shift) - CHUNK_SLACK) >> KD_UNIT_SHIFT < (size_t)u + first)
		shift++;
	assert(shift <= CHUNK_MAX_SHIFT);
	size_t bytes = ((size_t)1 << shift) - CHUNK_SLACK;
	uint8_t *c = malloc(bytes);
	if (c == NULL)
		return -ENOMEM;
	uint32_t idx = a->nchunks++;
	a->chunks[idx] = c;
	a->sizes[idx] = (uint32_t)bytes;
	a->bytes += bytes;
	if (a->wild_units)
		fl_push(a, a->wild, a->wild_units);
	a->wild = (idx << KD_OFF_BITS) | first;
	a->wild_units = (uint32_t)(bytes >> KD_UNIT_SHIFT) - first;
	return 0;
}

/* Allocates u units: *ret_h (untagged) gets u to u + KD_MIN_BLOCK - 1 units,
 * *ret_units says how many. In order: a free block of exactly u units, the
 * smallest larger one (split, or handed out whole when less than KD_MIN_BLOCK
 * would be left), the wilderness, a new chunk. Free blocks go before the
 * wilderness: as nodes outgrow a class, blocks of that size stop being asked
 * for, and only splitting puts them back to use. */
int kd_arena_alloc(struct kd_arena *a, uint32_t u, uint32_t *ret_h, uint32_t *ret_units)
{
	int rv;

	assert(u >= KD_MIN_BLOCK);
	for (;;) {
		unsigned c = size_class(u);
		if (c < KD_NEXACT) {
			uint32_t h = a->free_head[c];
			if (h != 0) {
				fl_unlink(a, c, NULL, h);
				*ret_h = h;
				*ret_units = u;
				return 0;
			}
		} else if (fl_fit(a, c, u, ret_h, ret_units)) {
			return 0;
		}
		/* Every block in a class above c has more than u units; the
		 * smallest goes first (a rest under KD_MIN_BLOCK becomes slack). */
		unsigned c2 = fl_next_class(a, c + 1);
		if (c2 < KD_NCLASS) {
			uint32_t h = a->free_head[c2];
			uint32_t s = rd32(kd_arena_at(a, h) + 4);
			fl_unlink(a, c2, NULL, h);
			*ret_h = h;
			*ret_units = take(a, h, s, u);
			return 0;
		}
		if (a->wild_units >= u) {
			uint32_t got = a->wild_units - u < KD_MIN_BLOCK ? a->wild_units : u;
			*ret_h = a->wild;
			*ret_units = got;
			a->wild += got;
			a->wild_units -= got;
			return 0;
		}
		if ((rv = arena_grow(a, u)) != 0)
			return rv;
	}
}

void kd_arena_free(struct kd_arena *a, uint32_t h, uint32_t units)
{
	fl_push(a, h & ~KD_HANDLE_TAG, units);
}

void kd_arena_release(struct kd_arena *a)
{
	for (uint32_t i = 0; i < a->nchunks; i++)
		free(a->chunks[i]);
	free(a->chunks);
	free(a->sizes);
	a->chunks = NULL;
	a->sizes = NULL;
	a->nchunks = 0;
	a->chunk_cap = 0;
	a->bytes = 0;
	a->wild = 0;
	a->wild_units = 0;
	memset(a->free_map, 0, sizeof a->free_map);
	memset(a->free_head, 0, sizeof a->free_head);
}

size_t kd_arena_memory(const struct kd_arena *a)
{
	return a->chunk_cap * (sizeof *a->chunks + sizeof *a->sizes) + a->bytes;
}

/* ---- images ---------------------------------------------------------------
 *
 *   u32 nchunks, wild, wild_units, 0; u64 bytes; u64 free_map[]; u32
 *   free_head[]; u32 size[nchunks]; the chunks' bytes, one after the other.
 */

#define IMG_HEAD (16 + 8 + sizeof(((struct kd_arena *)0)->free_map) + \
                  sizeof(((struct kd_arena *)0)->free_head))

size_t kd_arena_image_size(const struct kd_arena *a)
{
	return IMG_HEAD + a->nchunks * sizeof(uint32_t) + a->bytes;
}

void kd_arena_image_write(const struct kd_arena *a, uint8_t *p)
{
	uint32_t head[4] = {a->nchunks, a->wild, a->wild_units, 0};
	uint64_t bytes = a->bytes;

	memcpy(p, head, sizeof head);
	memcpy(p + 16, &bytes, 8);
	memcpy(p + 24, a->free_map, sizeof a->free_map);
	memcpy(p + 24 + sizeof a->free_map, a->free_head, sizeof a->free_head);
	p += IMG_HEAD;
	memcpy(p, a->sizes, a->nchunks * sizeof(uint32_t));
	p += a->nchunks * sizeof(uint32_t);
	for (uint32_t i = 0; i < a->nchunks; i++) {
		memcpy(p, a->chunks[i], a->sizes[i]);
		p += a->sizes[i];
	}
}

int kd_arena_image_read(struct kd_arena *a, const uint8_t *p, size_t len)
{
	uint32_t head[4];
	uint64_t bytes, sum = 0;
	const uint8_t *sizes;

	if (len < IMG_HEAD)
		return -EINVAL;
	memcpy(head, p, sizeof head);
	memcpy(&bytes, p + 16, 8);
	if (head[0] > KD_MAX_CHUNKS || len - IMG_HEAD < (size_t)head[0] * 4)
		return -EINVAL;
	sizes = p + IMG_HEAD;
	for (uint32_t i = 0; i < head[0]; i++) {
		uint32_t sz;
		memcpy(&sz, sizes + (size_t)i * 4, 4);
		if (sz < KD_MIN_BLOCK * 4 || sz > ((size_t)1 << CHUNK_MAX_SHIFT) - CHUNK_SLACK)
			return -EINVAL;
		sum += sz;
	}
	if (sum != bytes || len != IMG_HEAD + (size_t)head[0] * 4 + bytes)
		return -EINVAL;
	/* the wilderness lies in the newest chunk, if anywhere */
	if (head[2] != 0 &&
	    (head[0] == 0 || (head[1] >> KD_OFF_BITS) != head[0] - 1 ||
	     (uint64_t)(head[1] & KD_OFF_MASK) + head[2] > sum /* loose */))
		return -EINVAL;
	kd_arena_release(a);
	uint32_t cap = head[0] < 8 ? 8 : head[0];
	if ((a->chunks = calloc(cap, sizeof *a->chunks)) == NULL ||
	    (a->sizes = calloc(cap, sizeof *a->sizes)) == NULL) {
		kd_arena_release(a);
		return -ENOMEM;
	}
	a->chunk_cap = cap;
	memcpy(a->sizes, sizes, (size_t)head[0] * 4);
	p = sizes + (size_t)head[0] * 4;
	for (uint32_t i = 0; i < head[0]; i++) {
		if ((a->chunks[i] = malloc(a->sizes[i])) == NULL) {
			kd_arena_release(a);
			return -ENOMEM;
		}
		a->nchunks = i + 1;
		memcpy(a->chunks[i], p, a->sizes[i]);
		p += a->sizes[i];
	}
	a->bytes = bytes;
	a->wild = head[1];
	a->wild_units = head[2];
	memcpy(a->free_map, sizes - sizeof a->free_head - sizeof a->free_map, sizeof a->free_map);
	memcpy(a->free_head, sizes - sizeof a->free_head, sizeof a->free_head);
	return 0;
}
