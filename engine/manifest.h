/*
 * manifest.h — META: the durable record of what a database holds.
 *
 * META says which sealed segments the database has and how long each is,
 * which segment was active, the compact revision, and a version mark: no
 * version above the mark has ever been handed out. With it, recovery can
 * tell a segment that is gone (deleted, truncated, unreadable) from one that
 * never existed, and never hands out a version twice, whatever files are
 * lost. Layout in docs/FORMAT.md.
 *
 * Invariants:
 *   1. META is written to META.tmp, synced, renamed and the directory
 *      synced: it is always a whole, checked file.
 *   2. A segment is listed only once sealed: its data up to the listed size
 *      was synced before META named it.
 *   3. The mark is raised, durably, before a version above it is written
 *      (write path: form_and_start; recovery and every seal raise it too).
 *   4. Written only by whoever drives the database's write path (the
 *      driver, a barrier, or kv_open before the handle is published).
 */
#ifndef KV_MANIFEST_H
#define KV_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

struct kv_db;
struct kv_stor_tenant;

/* How far ahead of the versions handed out the mark is set: one META write
 * per this many versions. */
#define MANIFEST_MARK_STEP (1ull << 20)

struct manifest_seg {
	uint32_t id;
	uint64_t size; /* bytes, header included, when it was sealed */
};

struct manifest {
	uint32_t format;           /* 1: written by an older kvd (no list, no mark); 2; 3:
	                              2 where values may be compressed */
	uint64_t floor;            /* compact revision */
	uint64_t version_mark;     /* no version above it was handed out (format 2) */
	uint32_t active;           /* the active segment when it was written; 0: none */
	uint32_t merge_from;       /* a merge runs: its outputs have ids >= this; 0: none */
	uint64_t merge_seq;        /* and the sequence number its commit will carry */
	struct manifest_seg *segs; /* sealed segments, by id */
	size_t nsegs;
	uint8_t *raw; /* the file's bytes */
	size_t raw_len;
};

/* Parses the len bytes of a META file: magic, checksum, format version, a
 * length that is exactly the header and the entries it counts, segment ids
 * non-zero and increasing. KV_ECORRUPT, KV_EFORMAT, -ENOMEM; *ret (release
 * with manifest_release; raw stays NULL) is written only on success. */
int manifest_parse(const uint8_t *buf, size_t len, struct manifest *ret);
/* Reads and parses the tenant's META blob. -ENOENT, KV_ECORRUPT (checksum,
 * length, unreadable), KV_EFORMAT. */
int manifest_read(struct kv_stor_tenant *t, struct manifest *ret);
void manifest_release(struct manifest *m);
/* The entry of a listed segment, or NULL. */
const struct manifest_seg *manifest_find(const struct manifest *m, uint32_t id);

/* Writes META from the database: its sealed segments, the active one, the
 * compact floor and a mark at least MANIFEST_MARK_STEP/2 above the next
 * version. Nothing is written when META would not change. */
int manifest_write(struct kv_db *db);

#endif
