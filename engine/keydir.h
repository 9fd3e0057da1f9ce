/*
 * keydir.h — the in-memory key directory: an ordered map from key bytes to
 * the location of the newest record of that key.
 *
 * It is an adaptive radix tree with path compression and lazy expansion:
 * shared prefixes are stored once, in inner nodes; a leaf keeps only the part
 * of its key below the node it hangs from. Nodes and leaves live in a
 * per-directory arena addressed by 32-bit handles, so a child reference costs
 * four bytes and a leaf carries no malloc header.
 *
 * Keys are 1..KD_KEY_MAX arbitrary bytes (NUL and 0xFF included); a key may be
 * a prefix of another. Order is bytewise (memcmp, shorter first on a tie).
 *
 * Threads: not synchronised. Readers (keydir_get, keydir_walk, keydir_count,
 * keydir_memory) never modify the structure, so any number may run at once
 * under a shared lock; writers (keydir_put, keydir_remove) need it exclusive.
 */
#ifndef KV_KEYDIR_H
#define KV_KEYDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KD_KEY_MAX 65536u
/* A directory's arena is addressed by 32-bit handles: 8 GiB at most, past
 * which keydir_put fails with -ENOMEM. */
#define KD_ARENA_MAX (8ull << 30)

enum {
	KD_F_TOMBSTONE = 1u << 0, /* newest record is a delete */
	KD_F_TTL = 1u << 1,       /* expiry_ms is meaningful */
};

struct kd_entry {
	uint64_t version;   /* version of the newest record */
	uint32_t seg;       /* segment id holding it */
	uint32_t off;       /* byte offset of the record in the segment */
	uint32_t size;      /* record size in bytes, < 2^28 */
	uint32_t flags;     /* KD_F_* */
	uint64_t expiry_ms; /* with KD_F_TTL; 0 otherwise */
};

struct keydir;

int keydir_new(struct keydir **ret);
void keydir_free(struct keydir *kd);

/* 0 and *ret filled, or -ENOENT. */
int keydir_get(const struct keydir *kd, const void *key, size_t len, struct kd_entry *ret);

/* Inserts or replaces. When the key existed, *ret_old (if not NULL) gets the
 * previous entry and *ret_replaced (if not NULL) is set true; otherwise false.
 * -EINVAL for an empty or too long key, a size of 2^28 or more or unknown
 * flags; -ENOMEM (the directory is left as it was). Without KD_F_TTL the
 * expiry is not stored and reads back as 0. */
int keydir_put(struct keydir *kd, const void *key, size_t len, const struct kd_entry *e,
               struct kd_entry *ret_old, bool *ret_replaced);

/* Removes; *ret_old (if not NULL) gets the entry. -ENOENT if absent;
 * -ENOMEM when merging nodes needed memory (nothing changed). */
int keydir_remove(struct keydir *kd, const void *key, size_t len, struct kd_entry *ret_old);

/* Called for each key in order; key is valid only during the call. Return 0
 * to go on, anything else to stop (keydir_walk then returns that value). */
typedef int (*keydir_visit_fn)(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e);

/* Visits keys in ascending order starting at `from` (reverse: descending,
 * starting at `from` and going down). from == NULL starts at the first (last)
 * key. from_inclusive decides whether a key equal to from is visited.
 * Returns 0 after the last key, the visitor's value when it stopped (use
 * positive values), or -ENOMEM (the walk keeps its stack on the heap). */
int keydir_walk(const struct keydir *kd, const void *from, size_t from_len, bool from_inclusive,
                bool reverse, keydir_visit_fn fn, void *arg);

size_t keydir_count(const struct keydir *kd);

/* An image of the directory, for this host alone: keydir_image_size bytes
 * written by keydir_image_write, read back whole by keydir_image_read into a
 * new directory (0, -EINVAL when it does not add up, -ENOMEM). The image's
 * integrity is the caller's to check (a checksum): a damaged tree is not
 * detected here. */
size_t keydir_image_size(const struct keydir *kd);
void keydir_image_write(const struct keydir *kd, uint8_t *p);
int keydir_image_read(const uint8_t *p, size_t len, struct keydir **ret);

/* Bytes of memory the directory holds (arena chunks, free space included,
 * and the handle itself). */
size_t keydir_memory(const struct keydir *kd);

#endif
