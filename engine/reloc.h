/*
 * reloc.h — relocations left by merge, and the merge commit file.
 *
 * A record's previous-version pointer is a location (segment, offset) and is
 * never rewritten. Merge moves records; a record written while a merge ran
 * may point at a location merge then retired. For exactly those pointers merge
 * records old → new in a relocation map, persisted in its commit file
 * (merge-<seq>.commit) with the list of segments it retired. A pointer into a
 * retired segment with no relocation means the older versions were dropped:
 * the chain ends there.
 *
 * Invariants:
 *   1. The commit file is written (temp name, fsync, rename, directory fsync)
 *      before any retired segment is unlinked; recovery deletes the retired
 *      segments a commit file lists, so a merge is all or nothing.
 *   2. After merge k commits, nothing on disk points at a location that merge
 *      k-1 retired, so commit k-1 is deleted.
 * Threads: struct reloc is not synchronised; the database guards it with
 * seg_mu.
 */
#ifndef KV_RELOC_H
#define KV_RELOC_H

#include <stddef.h>
#include <stdint.h>

struct kv_stor_tenant;

static inline uint64_t loc_make(uint32_t seg, uint32_t off)
{
	return (uint64_t)seg << 32 | off;
}
static inline uint32_t loc_seg(uint64_t loc)
{
	return (uint32_t)(loc >> 32);
}
static inline uint32_t loc_off(uint64_t loc)
{
	return (uint32_t)loc;
}

struct reloc_ent {
	uint64_t from;
	uint64_t to;
};

struct reloc {
	struct reloc_ent *slots; /* open addressing; from == 0 is empty */
	size_t cap;              /* power of two */
	size_t n;
};

void reloc_init(struct reloc *r);
void reloc_release(struct reloc *r);
int reloc_put(struct reloc *r, uint64_t from, uint64_t to);
/* 0 and *ret, or -ENOENT. */
int reloc_get(const struct reloc *r, uint64_t from, uint64_t *ret);
/* Copies all entries into a malloc'd array (NULL when empty). */
int reloc_entries(const struct reloc *r, struct reloc_ent **ret, size_t *ret_n);

#define COMMIT_MAGIC "KVDMERG\1"
#define COMMIT_FORMAT_VERSION 1u

struct merge_commit {
	uint64_t seq;
	uint32_t *retired;
	size_t nretired;
	struct reloc_ent *relocs;
	size_t nrelocs;
};

/* Writes the blob merge-<seq>.commit durably (storage.h, KV_STOR_DURABLE). */
int commit_write(struct kv_stor_tenant *t, const struct merge_commit *c);
/* Parses the len bytes of a commit file: magic, checksum, format version,
 * and counts that account for exactly len bytes (KV_ECORRUPT, KV_EFORMAT,
 * -ENOMEM). *ret (release with commit_release) is written only on success. */
int commit_parse(const uint8_t *buf, size_t len, struct merge_commit *ret);
/* Loads one commit file by name and parses it with commit_parse;
 * KV_ECORRUPT when it does not check out. */
int commit_load(struct kv_stor_tenant *t, const char *name, struct merge_commit *ret);
void commit_release(struct merge_commit *c);

#endif
