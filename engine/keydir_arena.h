/*
 * keydir_arena.h — the key directory's arena (internal to keydir.c and
 * keydir_arena.c): chunks of memory that hold a directory's nodes and leaves,
 * addressed by 32-bit handles, with segregated free lists.
 *
 * The arena knows block sizes in 4-byte units and nothing of what a block
 * holds; keydir.c records each object's size (and slack) in the object itself
 * and gives it back when it frees the block (keydir.c, invariants 5 and 6).
 *
 *   handle  bit 31: the caller's tag (the arena ignores it); bits 30..18:
 *           chunk index; bits 17..0: offset in 4-byte units. 0 is null
 *           (unit 0 of chunk 0 is never handed out).
 *
 * Threads: none taken; an arena belongs to one directory and follows its
 * rules (kd_arena_at may run in any number of readers at once, the rest needs
 * the directory to itself).
 */
#ifndef KV_KEYDIR_ARENA_H
#define KV_KEYDIR_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KD_UNIT_SHIFT 2 /* a unit is 4 bytes */
#define KD_OFF_BITS   18
#define KD_OFF_MASK   ((1u << KD_OFF_BITS) - 1)
#define KD_CHUNK_BITS 13
#define KD_MAX_CHUNKS (1u << KD_CHUNK_BITS) /* 8192 chunks of at most 1 MiB: 8 GiB */
#define KD_HANDLE_TAG 0x80000000u           /* left to the caller */
#define KD_MIN_BLOCK  4                     /* units in the smallest object (Node2, empty prefix) */
#define KD_NEXACT     64  /* free classes 0..63 hold blocks of exactly that many units */
#define KD_NCLASS     128 /* above: four classes per power of two */

struct kd_arena {
	uint32_t nchunks;
	uint32_t chunk_cap;  /* entries in chunks[] */
	size_t bytes;        /* sum of chunk sizes */
	uint32_t wild;       /* the untouched tail of the newest chunk ... */
	uint32_t wild_units; /* ... and its length: 0 or >= KD_MIN_BLOCK */
	uint8_t **chunks;
	uint32_t *sizes; /* bytes of each chunk (chunk_cap entries) */
	uint64_t free_map[KD_NCLASS / 64];
	uint32_t free_head[KD_NCLASS];
};

/* ---- byte access (multi-byte fields in host order, through memcpy) ------- */

static inline uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof v);
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof v);
}

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void wr64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof v);
}

/* ---- the arena ----------------------------------------------------------- */

/* The bytes at handle h (its tag bit ignored). */
static inline uint8_t *kd_arena_at(const struct kd_arena *a, uint32_t h)
{
	return a->chunks[(h >> KD_OFF_BITS) & (KD_MAX_CHUNKS - 1)] +
	       ((size_t)(h & KD_OFF_MASK) << KD_UNIT_SHIFT);
}

/* Allocates u >= KD_MIN_BLOCK units: *ret_h (untagged) gets u to
 * u + KD_MIN_BLOCK - 1 units and *ret_units says how many; that count is what
 * kd_arena_free must be given back. 0, or -ENOMEM when no chunk can be
 * opened (KD_MAX_CHUNKS reached, or malloc failed); nothing is handed out
 * then. */
int kd_arena_alloc(struct kd_arena *a, uint32_t u, uint32_t *ret_h, uint32_t *ret_units);

/* Puts the block of `units` units at h (tag bit ignored) on a free list. */
void kd_arena_free(struct kd_arena *a, uint32_t h, uint32_t units);

/* Frees every chunk: the arena is empty again, as a zeroed one is. */
void kd_arena_release(struct kd_arena *a);

/* Bytes the arena holds: its chunks (free space included) and chunk table. */
size_t kd_arena_memory(const struct kd_arena *a);

/* An image of the arena, for this host alone (host byte order): its state
 * and every chunk's bytes, free blocks included. kd_arena_image_size bytes
 * are written by kd_arena_image_write; kd_arena_image_read makes an empty
 * arena the same again: 0, -EINVAL when the image does not
 * add up (the arena left empty), -ENOMEM. */
size_t kd_arena_image_size(const struct kd_arena *a);
void kd_arena_image_write(const struct kd_arena *a, uint8_t *p);
int kd_arena_image_read(struct kd_arena *a, const uint8_t *p, size_t len);

#endif
