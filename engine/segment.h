/*
 * segment.h — segments: a 64-byte header followed by records, stored by id
 * through the storage interface (storage.h; the files backend names them
 * <id as 8 hex digits>.seg); the budget of open segment handles; and the
 * scanner that walks a segment record by record for recovery and hint
 * generation.
 *
 * Invariants:
 *   1. Segment ids are never reused; prev_seg == 0 means "none", so ids start at 1.
 *   2. Only the active segment is appended to; every other segment is sealed
 *      and immutable until merge retires it.
 *   3. A struct seg lives while refs > 0. The segment table holds one
 *      reference; every reader holds one while it uses h. The handle
 *      is closed when the last reference goes; a retired segment is removed
 *      by merge before that, which is safe for readers still holding h.
 * Threads: refs is atomic; the other fields are set before the segment is
 * published in the table (under db->seg_mu) or by the write-path driver.
 */
#ifndef KV_SEGMENT_H
#define KV_SEGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct kv_io_fault;
struct kv_stor_seg;
struct kv_stor_tenant;

#define SEG_HEADER_SIZE 64u
#define SEG_FORMAT_VERSION 1u
#define SEG_MAGIC "KVDLOG\0\1"

enum {
	SEG_F_MERGED = 1u << 0, /* written by merge: complete and synced before it got its name */
};

struct hint_writer;

struct seg {
	uint32_t id;
	uint32_t flags; /* SEG_F_* */
	struct kv_stor_seg *h; /* open handle (storage.h); NULL while the budget keeps it closed */
	struct kv_stor_tenant *tn; /* the database's storage (borrowed) */
	uint32_t pins;             /* users of h; guarded by the file budget's lock */
	struct seg *lru_prev, *lru_next;
	bool in_lru;
	uint64_t size;         /* bytes of valid data, header included */
	uint64_t base_version; /* last version of the database when it was created */
	uint32_t crc_seed;     /* its records' crc seed (record.h invariant 1) */
	atomic_uint refs;
	bool sealed;
	bool has_hint;
	bool retired;
	/* Lost: META lists it but its file is gone, shorter than a header or
	 * unreadable. It stays in the table (never opened: seg_pin gives
	 * KV_ECORRUPT), so the keys its hint names read DATA_LOSS. */
	bool lost;
	uint64_t lost_size; /* its size as META last listed it */
	uint64_t reserved; /* [driver] bytes of the active segment fallocate'd so far */
	/* Mapped reads: while h is open and map_hint is set, the first map_len
	 * (= map_hint) bytes of the file are mapped read-only at map, set up
	 * by seg_pin and torn down with the handle (both under the file
	 * budget's lock), so a reader holding a pin may read through it. */
	uint64_t map_hint;
	_Atomic(const uint8_t *) map; /* stored (release) after map_len */
	size_t map_len;
	/* Its hint as the write path collected it while it was active (hint.h;
	 * written by db_write_hints instead of a scan), or NULL. [seg_mu] */
	struct hint_writer *hint_ready;
};

/* Names: buf must hold SEG_NAME_MAX bytes. */
#define SEG_NAME_MAX 32
void seg_name(char *buf, uint32_t id, const char *ext);

/* Creates a segment (storage.h seg_create; stor_flags KV_STOR_SEG_TEMP for
 * one that is published later), writes and syncs its header. Its creation
 * is not made durable here (tenant_sync). */
int seg_create(struct kv_stor_tenant *tn, uint32_t id, uint32_t flags, uint64_t base_version,
               uint64_t now_ms, unsigned stor_flags, struct seg **ret);

/* Opens an existing segment and checks its header (KV_EFORMAT, KV_ECORRUPT). */
int seg_open(struct kv_stor_tenant *tn, uint32_t id, struct seg **ret);

/* Opens a segment without checking its header (its header is damaged). */
int seg_open_raw(struct kv_stor_tenant *tn, uint32_t id, struct seg **ret);

/* A placeholder for a lost segment of `size` bytes (see `lost`). */
int seg_new_lost(struct kv_stor_tenant *tn, uint32_t id, uint64_t size, struct seg **ret);

void seg_ref(struct seg *s);
void seg_unref(struct seg *s);

/*
 * Open files are a budget shared by every database of the process: a
 * segment's file is opened when someone pins it and, once nobody does, may
 * be closed again least recently used first when the budget is full.
 * seg_create and seg_open return the segment pinned once. The active segment
 * stays pinned; readers pin around their preads.
 */
int seg_pin(struct seg *s); /* 0 (s->h is open), -errno, or KV_ECORRUPT (lost) */
void seg_unpin(struct seg *s);
/* Asks for mapped reads of the first `len` bytes (0: none) from the next
 * seg_pin on. */
void seg_map_set(struct seg *s, uint64_t len);
/* For a pinned segment: its mapping (NULL: none) and, when there is one,
 * how many bytes it covers. */
const uint8_t *seg_map(struct seg *s, size_t *ret_len);

/* ---- scanning ---------------------------------------------------------- */

struct seg_scan_rec {
	struct rec_header h;
	const uint8_t *key;   /* h.key_len bytes */
	const uint8_t *value; /* h.value_len bytes */
	uint64_t off;         /* offset of the record in the segment */
	uint64_t size;        /* record size */
};

struct seg_scan_result {
	uint64_t valid_end;       /* end of the last good record */
	uint64_t records;
	uint32_t corrupt_records; /* damaged regions skipped (resynchronised after) */
	uint64_t corrupt_bytes;
	uint64_t first_corrupt_off; /* 0 when none */
	uint64_t sync_mark;       /* highest offset a sync mark says was durable */
	uint64_t unsynced_cut;    /* SEG_SCAN_ACTIVE: bytes past a hole left unread (0: none) */
};

enum {
	/* The segment being written when the process stopped: damage at or past
	 * the highest offset any of its sync marks says was durable is where
	 * unsynced writes reached the disk out of order (or not at all); the
	 * scan ends there, as at a torn tail, and what follows is not passed to
	 * cb. Damage before it is damage, skipped and reported. */
	SEG_SCAN_ACTIVE = 1u << 0,
};

/* Calls cb for every record that passes its bounds and crc, in order
 * (sync marks are not passed on: they go into sync_mark). A
 * damaged region is skipped up to the next record that checks out, and
 * reported to damage (if not NULL) -- with the damaged record's header and
 * key when its header still passes its bounds (only its crc failed), so the
 * caller can index it and reads of that key report the damage instead of
 * falling back to an older version. Damage with nothing valid after it ends
 * the scan at valid_end (a torn tail; not reported to damage). The
 * callbacks return 0 to go on or a negative error to stop the scan. */
typedef int (*seg_scan_fn)(void *arg, const struct seg_scan_rec *r);
typedef int (*seg_damage_fn)(void *arg, uint64_t off, uint64_t len,
                             const struct seg_scan_rec *plausible);
int seg_scan(struct kv_stor_seg *h, uint64_t file_size, uint32_t max_key, uint32_t max_value,
             unsigned flags, seg_scan_fn cb, seg_damage_fn damage, void *arg,
             struct seg_scan_result *ret);

#endif
