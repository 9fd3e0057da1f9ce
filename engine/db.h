/*
 * db.h — the database handle and what the engine's modules share.
 *
 * What a kv_db owns: its tenant of a storage instance (storage.h: the
 * lock, segments, hints, merge commits, META), the key directory, the
 * segment table, the relocation map, the write queue and the write-path
 * state.
 *
 * Locks, in the order they may be taken:
 *   mu       — the write queue, the driver flag, open snapshots, closing.
 *   kd_lock  — the key directory (rwlock). Only the write-path driver
 *              modifies it (batch apply, merge swaps run as barriers) and
 *              holds it exclusively only to do so; the driver reads it without
 *              the lock. Everyone else reads it shared.
 *   seg_mu   — the segment table and the relocation map.
 *   upload_mu — the open uploads and their chunk lists (blob.c); taken
 *              alone, never with another of these held.
 * A reader looks up the key directory and takes its segment reference while
 * holding kd_lock shared, so a merge swap can never retire the segment
 * between the two.
 *
 * The write-path driver is whichever thread holds `driving` (set under mu):
 * a blocking writer waiting for its request, or the event loop inside
 * kv_process(). Only the driver touches the fields marked [driver].
 */
#ifndef KV_DB_H
#define KV_DB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "blob.h"
#include "codec.h"
#include "evict.h"
#include "io.h"
#include "keydir.h"
#include "kvengine.h"
#include "record.h"
#include "reloc.h"
#include "segment.h"
#include "storage.h"

/* request flags (kv_req.flags_) */
enum {
	REQ_F_BLOCKING = 1u << 0,      /* a thread waits on db->cv for it */
	REQ_F_DONE = 1u << 1,          /* completed (blocking requests) */
	REQ_F_BARRIER = 1u << 2,       /* runs a function with no batch in flight */
	REQ_F_SINGLE_DELETE = 1u << 3, /* kv_delete: a missing key is KV_ENOTFOUND */
};

#define BATCH_BYTES_MAX (4u << 20)
#define BATCH_REQS_MAX 4096u
#define REQ_BYTES_MAX (1ull << 30)

struct barrier {
	struct kv_req req;
	int (*fn)(kv_db *db, void *arg);
	void *arg;
};

/* One pending key-directory change of the batch being formed. */
struct ov_ent {
	const uint8_t *key; /* NULL: the key is in the record, in the batch buffer */
	uint32_t key_len;
	uint32_t hash;
	int32_t next; /* older overlay entry in the same hash bucket, -1 = none */
	uint32_t rec_off; /* record offset inside the batch buffer */
	struct kd_entry e;
};

struct batch {
	uint8_t *buf;
	size_t len, cap;
	struct kv_req *head, *tail; /* requests completed with this batch */
	size_t nreqs;
	struct ov_ent *ov;
	size_t nov, capov;
	int32_t *ht;
	size_t htcap;
	uint64_t first_version;
	int64_t keys_delta;  /* live keys it adds */
	int64_t bytes_delta; /* bytes of live keys' newest records it adds */
	size_t evict_pos;    /* the next entry of db->order it may evict */
	uint64_t evictions;  /* keys it evicts */
	uint64_t start_us; /* db_clock_us() when its write was submitted */
	/* its puts' values: bytes as given, as stored, how many compressed */
	uint64_t val_logical, val_stored, val_compressed;
	uint64_t blobs; /* its blob records (chunks and descriptors) */
	bool synced;    /* its append syncs (sync=always, and not blob chunks alone) */
};

struct kv_db {
	char *path;
	struct kv_storage *stor;   /* where the database lives (storage.h) */
	bool own_stor;             /* stor is closed with the database (kv_open's own) */
	struct kv_stor_tenant *tn; /* the database's own space in it */
	int efd;
	struct kv_options opt;
	struct kv_stor_writer *wr; /* the write path's appends (storage.h) */
	bool map_reads;  /* records read through mappings (iomap.c) when they can be */

	pthread_rwlock_t kd_lock;
	struct keydir *kd;
	/* accounting, written under kd_lock exclusive */
	uint64_t live_keys;
	uint64_t tombstones;
	uint64_t live_bytes;
	uint64_t tomb_bytes; /* of live_bytes, the tombstones' */
	uint64_t disk_bytes;
	struct blobmap blob_heads; /* blob.h invariant 3 */

	pthread_mutex_t upload_mu; /* the open uploads and their chunk lists */
	struct kv_upload *uploads;
	_Atomic uint64_t upload_bytes; /* chunk records of open uploads */

	pthread_mutex_t seg_mu;
	struct seg **segs; /* sorted by id */
	size_t nsegs, capsegs;
	struct reloc reloc;
	uint32_t next_seg_id;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kv_req *q_head, *q_tail;
	bool driving;
	bool closing;
	uint64_t *snaps; /* versions open iterators read at */
	size_t nsnaps, capsnaps;

	/* [driver] */
	struct seg *active;
	uint64_t tail;
	uint64_t next_version;
	struct batch batch;
	bool in_flight;
	/* sync=always: blob chunks were appended without a sync since the
	 * last synced batch (write.c, drive_start) */
	bool chunks_unsynced;
	struct codec_ctx codec; /* compresses values as they join a batch */
	/* The live keys by write order (evict.h), kept when opt.evict is
	 * KV_EVICT_OLDEST */
	struct evict_order order;
	/* The active segment's hint entries, collected as its batches land,
	 * while collecting: from its creation, until HINT_COLLECT_MAX bytes. At
	 * the roll they become its hint_ready, and its hint is written without
	 * reading it back (a segment reopened after recovery is scanned). */
	struct hint_writer *collect;

	_Atomic uint64_t committed_version;
	atomic_bool read_only;
	_Atomic uint64_t unsynced_bytes;
	_Atomic uint64_t compact_floor;
	atomic_bool merging;
	_Atomic uint64_t merges;
	_Atomic uint64_t batches;
	_Atomic uint64_t batched_writes;
	_Atomic uint64_t syncs;
	/* the codec of values written from now on: kv_codec | level << 8
	 * (kv_set_compression; read by the driver as it forms a batch) */
	_Atomic uint32_t codec_cfg;
	_Atomic uint64_t value_logical_bytes; /* kv_stats */
	_Atomic uint64_t value_stored_bytes;  /* kv_stats */
	_Atomic uint64_t values_compressed;   /* kv_stats */
	_Atomic uint64_t evictions;           /* kv_stats */
	_Atomic uint64_t evict_bytes;         /* kv_stats: memory of order */
	/* META is written as format 3: a compressed value was written (sticky) */
	atomic_bool meta_v3;
	/* ... as format 4: a blob was written (sticky) */
	atomic_bool meta_v4;
	_Atomic uint64_t sync_us_sum;                  /* kv_stats */
	_Atomic uint64_t sync_hist[KV_SYNC_BUCKETS];   /* kv_stats */
	_Atomic uint64_t batch_hist[KV_BATCH_BUCKETS]; /* kv_stats */
	_Atomic uint64_t retained_bytes; /* kept history after the last merge */
	_Atomic uint64_t seg_epoch;      /* bumped when merge retires segments */
	uint64_t last_sync_ms;
	uint64_t merge_seq;
	/* [driver] META (manifest.h): the mark it promises and its bytes as
	 * last written or read, so an unchanged META is not written again */
	uint64_t version_mark;
	uint32_t merge_from; /* a merge runs: segments from this id on are newer than its set */
	bool has_lost;       /* a lost segment is in the table (set at open) */
	uint8_t *meta;
	size_t meta_len;
	/* Sync marks (record.h): where the active segment is known durable,
	 * as loc_make(segment id, offset): written_loc by the driver after each
	 * batch, durable_loc once a sync covered it; mark_loc and mark_ms are
	 * the last mark the driver wrote [driver]. */
	_Atomic uint64_t written_loc;
	_Atomic uint64_t durable_loc;
	uint64_t mark_loc;
	uint64_t mark_ms;

	pthread_mutex_t merge_mu; /* one merge at a time */
	pthread_t bg;
	bool bg_running;
	pthread_cond_t bg_cv;

	struct kv_recovery_info rinfo;
};

/* db.c */
/* kv_check on the tenant `tenant` of the storage instance st (which it
 * takes a shared lock of). */
int db_check(struct kv_storage *st, const char *tenant, kv_check_fn fn, void *arg,
             struct kv_check_summary *ret);

/* kv_open on the tenant `tenant` of the storage instance st. own: once
 * the open succeeded, st belongs to the database and is closed with it;
 * after a failure it stays the caller's. Errors as kv_open. */
int db_open(struct kv_storage *st, bool own, const char *tenant, const struct kv_options *opts,
            kv_db **ret_db);
uint64_t db_now(kv_db *db);
uint64_t db_reclaimable(kv_db *db);
/* Sealed segments less than a quarter full on a device (db.c); a merge is
 * due once there are DB_UNDERFILLED_MERGE of them. */
size_t db_underfilled(kv_db *db);
#define DB_UNDERFILLED_MERGE 4

/* segtab.c */
int db_fsync_dir(kv_db *db);
/* Segment table, under seg_mu. */
struct seg *segtab_find_locked(kv_db *db, uint32_t id);
int segtab_insert_locked(kv_db *db, struct seg *s);
void segtab_remove_locked(kv_db *db, uint32_t id);
/* Takes a reference on the segment holding loc, following relocations:
 * *ret_loc is where the record is now. -ENOENT: dropped by merge. */
int db_seg_acquire(kv_db *db, uint64_t loc, struct seg **ret_seg, uint64_t *ret_loc);
/* Drops what db_seg_acquire took (the pin on the file and the reference). */
void db_seg_release(struct seg *s);
/* Writes hint files for sealed segments that lack one. */
int db_write_hints(kv_db *db);

/* scan.c */
/* A copy of the versions open iterators read at (*ret NULL and *ret_n 0
 * when none is open); the caller frees it. -ENOMEM, outputs untouched: the
 * caller cannot know which versions are still read. */
int db_snapshots(kv_db *db, uint64_t **ret, size_t *ret_n);

/* write.c */
int write_submit(kv_db *db, struct kv_req *req);
/* Queues req (REQ_F_BLOCKING set) and waits for it, driving the write path
 * when no one else does. Returns the request's status. */
int write_run(kv_db *db, struct kv_req *req);
/* Runs fn on the write-path driver with no batch in flight. */
int write_barrier(kv_db *db, int (*fn)(kv_db *db, void *arg), void *arg);
/* [driver] seals the active segment and starts a new one. */
int write_roll(kv_db *db);
void write_release(kv_db *db);
/* CLOCK_MONOTONIC in microseconds (the engine's durations). */
uint64_t db_clock_us(void);
/* Counts one fdatasync (or sync=always batch) that began at start_us. */
void db_count_sync(kv_db *db, uint64_t start_us);
/* Counts one batch of nreqs writes. */
void db_count_batch(kv_db *db, size_t nreqs);
/* Keeps the accounting of a key-directory change (kd_lock exclusive). */
void db_account(kv_db *db, const struct kd_entry *e, const struct kd_entry *old, bool replaced);
void db_account_remove(kv_db *db, const struct kd_entry *old);

/* read.c */
struct rec_read {
	struct rec_header h;
	uint64_t loc;   /* where the record was found */
	uint8_t *buf;   /* whole record when the value was read, else NULL */
	const uint8_t *value;
};
/* Reads the record at loc (following relocations) and checks that it is a
 * record of key. With want_value the whole record is read and its crc
 * checked; otherwise the header and key are read and the header bounds
 * checked. -ENOENT: the location was dropped by merge. */
/* Asks for mapped reads of s (sealed: its size; the active segment: as far
 * as it will grow), when the database reads so. */
void db_seg_map(kv_db *db, struct seg *s, bool active);
int read_at(kv_db *db, uint64_t loc, const void *key, size_t key_len, bool want_value,
            struct rec_read *ret);
void rec_read_release(struct rec_read *r);
/* Reads the header and key of the record at loc, whatever its key:
 * *ret_key a malloc'd copy of its h.key_len bytes (the caller frees it).
 * The record's crc is not checked: the caller checks what it found against
 * the key directory. -ENOENT (dropped by merge), KV_ECORRUPT, -ENOMEM. */
int read_key_at(kv_db *db, uint64_t loc, struct rec_header *ret_h, uint8_t **ret_key);
/* The logical value of r, read with its value: *ret_len its length and
 * r->value its bytes — decompressed into a buffer that replaces r->buf when
 * the record's value is compressed (r->h keeps the stored length). 0,
 * KV_ECORRUPT (the value does not decompress), -ENOMEM; r is unchanged on
 * failure. */
int rec_read_value(struct rec_read *r, size_t *ret_len);
/* The record kv_get answers with (its value as stored, not decompressed):
 * kv_get's errors. */
int get_record(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
               struct rec_read *ret);
/* Follows key's chain from head to the newest record with version ≤ version.
 * KV_ENOTFOUND before the key's first version, KV_ECOMPACTED where merge cut
 * the history. */
int chain_at_version(kv_db *db, const void *key, size_t key_len, const struct kd_entry *head,
                     uint64_t version, bool want_value, struct rec_read *ret);
/* Whether a record with expiry_ms has expired at now (0: it never does). */
static inline bool db_expired(kv_db *db, uint64_t expiry_ms, uint64_t now)
{
	(void)db;
	return expiry_ms != 0 && expiry_ms <= now;
}

/* recovery.c */
int recovery_run(kv_db *db);

#endif
