/*
 * kvengine.h — the kvd storage engine, embeddable.
 *
 * A database is a directory holding an append-only log split into segments,
 * hint files for sealed segments and a few small control files — or, in a
 * store on a block device, a tenant in the device's extents (the "block
 * devices" section below). An in-memory
 * ordered key directory points at the newest record of every key; every write
 * gets a version from a per-database 64-bit counter, and older versions are
 * reached through the previous-location field each record carries.
 *
 * Conventions (see STYLE.md):
 *   - every call returns 0 on success, a negative errno or a negative KV_E*
 *     code on failure; kv_strerror() names either;
 *   - outputs go through ret_* parameters, last, untouched on failure;
 *   - destructors accept NULL;
 *   - the engine never prints; errors carry the detail.
 *
 * Threads: the blocking calls (kv_put, kv_get, kv_scan_*, kv_batch, …) may be
 * called from any number of threads at once on the same handle. Writers
 * arriving together share one write and, under KV_SYNC_ALWAYS, one
 * fdatasync (group commit). kv_submit()/kv_process() are the non-blocking
 * form of the same write path, for an event loop that owns the database.
 */
#ifndef KVENGINE_H
#define KVENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KV_ENGINE_VERSION "0.1.0"

/* Engine error codes. They are below -4095 so they never collide with a
 * negative errno. */
enum {
	KV_ENOTFOUND = -10001,    /* no such key, or deleted, expired, or no such version */
	KV_ECONFLICT = -10002,    /* if_version did not match the head version */
	KV_ECORRUPT = -10003,     /* a record failed its checksum or bounds (data loss) */
	KV_EREADONLY = -10004,    /* an fsync failed earlier; writes refused until reopen */
	KV_EKEYSIZE = -10005,     /* key empty or longer than max_key_size */
	KV_EVALSIZE = -10006,     /* value longer than max_value_size */
	KV_ECOMPACTED = -10007,   /* requested version is older than retained history */
	KV_ELOCKED = -10008,      /* another process has the database open */
	KV_EFORMAT = -10009,      /* on-disk format not understood (version, magic) */
	KV_ECLOSED = -10010,      /* the database is closing */
	KV_EMAXKEYS = -10011,     /* max_keys or max_bytes reached (and nothing to evict) */
	KV_EEND = -10012,         /* iterator exhausted (not an error) */
	KV_EBATCHSIZE = -10013,   /* a batch larger than the engine accepts */
	KV_EREFUSED = -10014,     /* a tenant refused: its TENANT file is missing, damaged or
	                             not a regular file (kv_store_why_refused says which) */
	KV_ENOTBLOB = -10015,     /* a blob call on a value that is not a blob */
};

/* Returns a static, one-line description of a KV_E* code or negative errno. */
const char *kv_strerror(int err);

/* Hard limits; the options below may only lower them. */
#define KV_KEY_SIZE_MAX (64u * 1024u)           /* 65536 bytes */
#define KV_VALUE_SIZE_MAX (128u * 1024u * 1024u) /* 128 MiB */
#define KV_SEGMENT_SIZE_MAX (2ull * 1024 * 1024 * 1024)
#define KV_BATCH_OPS_MAX 65536u

/* Defaults of the options below, defined here once (kvd's settings start
 * from them too). */
#define KV_SEGMENT_SIZE_DEFAULT (64ull << 20)     /* 64 MiB */
#define KV_VALUE_SIZE_DEFAULT (16u << 20)         /* 16 MiB */
#define KV_SYNC_INTERVAL_MS_DEFAULT 100u
#define KV_MERGE_RATIO_PCT_DEFAULT 50u
#define KV_MERGE_MIN_BYTES_DEFAULT (16ull << 20)  /* 16 MiB */

/* Passed as if_version: no condition on the head version. */
#define KV_ANY_VERSION UINT64_MAX

enum kv_sync {
	KV_SYNC_ALWAYS = 0,   /* a write returns once it is on stable storage */
	KV_SYNC_INTERVAL = 1, /* fdatasync every sync_interval_ms; a crash may lose that window */
	KV_SYNC_NONE = 2,     /* written to the page cache; survives a process crash, not a power cut */
};

enum kv_io {
	KV_IO_AUTO = 0,  /* io_uring, or pread/pwrite when io_uring cannot be set up */
	KV_IO_URING = 1, /* io_uring or fail */
	KV_IO_PSYNC = 2, /* pread/pwrite/fdatasync */
};

/* How values are stored (docs/FORMAT.md, "Compressed values"). A value is
 * stored compressed only when that makes it shorter; every record says how
 * its own value is stored, so the codec can change at any time. Reads always
 * give the value as written. */
enum kv_codec {
	KV_CODEC_NONE = 0, /* as given */
	KV_CODEC_LZ4 = 1,  /* LZ4 block (fast, modest ratio) */
	KV_CODEC_ZSTD = 2, /* zstd frame, level 1..22 (0: 3) */
};

/* Parses the n bytes at s as "none", "lz4", "zstd" or "zstd:LEVEL" (1..22).
 * 0, or -EINVAL. */
int kv_codec_parse(const char *s, size_t n, enum kv_codec *ret_codec, int *ret_level);
/* Writes the form kv_codec_parse reads (NUL-terminated) into buf.
 * 0, -EINVAL (not a valid codec and level), -ENOBUFS. KV_CODEC_NAME_MAX
 * bytes always suffice. */
#define KV_CODEC_NAME_MAX 16
int kv_codec_format(enum kv_codec codec, int level, char *buf, size_t cap);

/* What a write does that would take a database past max_keys or
 * max_bytes. */
enum kv_evict {
	KV_EVICT_REFUSE = 0, /* it fails with KV_EMAXKEYS */
	KV_EVICT_OLDEST = 1, /* it first evicts the least recently written keys */
};

/* Parses the n bytes at s as "refuse" or "oldest". 0, or -EINVAL. */
int kv_evict_parse(const char *s, size_t n, enum kv_evict *ret);
/* "refuse" or "oldest"; NULL for anything else. */
const char *kv_evict_name(enum kv_evict e);

/* Wall clock in milliseconds since the Unix epoch. */
typedef uint64_t (*kv_clock_fn)(void *arg);

struct kv_io_fault; /* test hook, see engine/io.h */

struct kv_options {
	uint64_t segment_size;      /* bytes before a segment is sealed; default 64 MiB */
	enum kv_sync sync;          /* default KV_SYNC_ALWAYS */
	uint32_t sync_interval_ms;  /* KV_SYNC_INTERVAL period; default 100 */
	uint32_t history_versions;  /* merge keeps the newest N versions of a key; ≥ 1, default 1 */
	uint64_t history_ms;        /* merge also keeps versions younger than this; default 0 */
	uint32_t max_key_size;      /* default KV_KEY_SIZE_MAX */
	uint32_t max_value_size;    /* default 16 MiB */
	uint64_t max_keys;          /* live keys allowed; 0 = unlimited */
	/* Bytes of the newest records of the live keys allowed (kv_stats's
	 * live_bytes less its tombstone_bytes); 0 = unlimited. */
	uint64_t max_bytes;
	/* What a write past max_keys or max_bytes does; default refuse. Under
	 * KV_EVICT_OLDEST a put or batch that would pass a limit first
	 * deletes, in the same atomic write, as many of the least recently
	 * written live keys (lowest head version first, never one the same
	 * write batch writes) as it takes to fit; each evicted key gets a
	 * tombstone that cuts its history (reads of it as of an older version
	 * give KV_ECOMPACTED, merge reclaims its records). A write that cannot
	 * fit even then fails with KV_EMAXKEYS. Keeping the order costs 16 to
	 * 32 bytes of memory per live key (kv_stats.evict_order_bytes). */
	enum kv_evict evict;
	enum kv_codec compression;  /* codec of values written from now on; default none */
	int compression_level;      /* zstd level 1..22; 0 = the codec's default (lz4: 0 only) */
	uint32_t merge_ratio_pct;   /* auto-merge when reclaimable bytes reach this % of the log; 0 = never; default 50 */
	uint64_t merge_min_bytes;   /* and at least this many reclaimable bytes; default 16 MiB */
	enum kv_io io;              /* default KV_IO_AUTO */
	bool background;            /* a thread per database for interval sync, hints and auto-merge; default true */
	bool external_loop;         /* an event loop calls kv_process(); blocking writes wait for it; default false */
	bool create_if_missing;     /* default true */
	bool lock;                  /* flock path/LOCK while open; default true (a store locks its
	                               whole directory instead) */
	bool mmap_reads;            /* read records through read-only mappings of the log
	                               files (a page the kernel cannot read is an error,
	                               not a crash: the engine installs a SIGBUS handler
	                               that passes other faults on); default true */
	kv_clock_fn clock;          /* default: CLOCK_REALTIME */
	void *clock_arg;
	struct kv_io_fault *fault;  /* test-only I/O fault injection; NULL in production */
};

/* Fills *o with the defaults above. */
void kv_options_init(struct kv_options *o);

/* 0 when this process can set up io_uring, else why not (-errno):
 * KV_IO_AUTO databases then use pread/pwrite. */
int kv_io_uring_probe(void);

typedef struct kv_db kv_db;

/*
 * Opens (or creates) the database in directory path. Takes an exclusive lock
 * on path/LOCK (released by the kernel if the process dies, so a crash never
 * leaves a stale lock), loads hint files of sealed segments, replays segments
 * without hints, truncates a torn tail and starts a new active segment.
 * Errors: KV_ELOCKED, KV_EFORMAT, -ENOENT (missing and !create_if_missing),
 * -EINVAL (bad options), -errno from the file system.
 */
int kv_open(const char *path, const struct kv_options *opts, kv_db **ret_db);

/* What the last kv_open() found and repaired; for logs and `kvd --check`. */
struct kv_recovery_info {
	uint32_t segments;          /* segments loaded */
	bool keydir_image;          /* the key directory came from the image of the last clean
	                               close (no segment or hint read) */
	uint32_t hints_loaded;      /* segments loaded from hint files */
	uint32_t hints_rejected;    /* hint files missing a checksum or bounds, segment scanned instead */
	uint32_t segments_scanned;  /* segments replayed record by record */
	uint64_t records;           /* records indexed */
	uint64_t truncated_bytes;   /* torn tail cut off the newest segment (on a device: the
	                               rest of the extent of a segment left open, open_segment) */
	uint32_t open_segment;      /* on a device: the segment a crash left open, now sealed
	                               at open_end, where its log ends (0: none) */
	uint64_t open_end;
	uint32_t corrupt_records;   /* damaged records skipped inside segments */
	uint64_t corrupt_bytes;     /* bytes skipped with them */
	uint32_t lost_segments;     /* sealed segments META lists that are gone or unreadable
	                               (keys their hints name read KV_ECORRUPT) */
	uint64_t lost_bytes;        /* bytes of sealed segments gone: lost ones and cut ones */
	bool versions_raised;       /* segments were lost: versions go on above META's mark */
	char damaged_file[64];      /* the first damaged file found ("" when none) */
	uint32_t merge_leftovers;   /* outputs of a merge a crash interrupted, removed */
	uint64_t elapsed_us;        /* time kv_open spent recovering */
};
/* Always 0. */
int kv_recovery_info(kv_db *db, struct kv_recovery_info *ret);

/* Finishes queued writes, syncs, writes missing hint files and (files
 * backend) the key-directory image the next open may take, closes. NULL ok.
 * Errors (the handle is freed all the same): -EIO from the final sync or a
 * hint file, -ENOSPC (a hint file did not fit; it is only a cache). */
int kv_close(kv_db *db);

/* ---- writes ------------------------------------------------------------ */

struct kv_write_opts {
	uint64_t if_version; /* KV_ANY_VERSION (default), 0 = must not exist, else head must be this version */
	uint64_t ttl_ms;     /* 0 = no expiry; otherwise the value expires ttl_ms after the write,
	                        at KV_EXPIRY_MAX at the latest (a larger sum is capped, not wrapped) */
};
/* The latest expiry a write can get (ms since the epoch, about 584 million
 * years away): a TTL that would reach past it is capped to it. */
#define KV_EXPIRY_MAX (UINT64_MAX - 1)
/* Zero-initialised options mean "if_version 0"; use this to get the defaults. */
#define KV_WRITE_OPTS_INIT { KV_ANY_VERSION, 0 }

/* Stores value under key; *ret_version gets the new version. opts may be NULL.
 * Errors: KV_EKEYSIZE, KV_EVALSIZE, KV_ECONFLICT, KV_EMAXKEYS, KV_EREADONLY,
 * -ENOSPC, -EIO. */
int kv_put(kv_db *db, const void *key, size_t key_len, const void *value, size_t value_len,
           const struct kv_write_opts *opts, uint64_t *ret_version);

/* Writes a tombstone; *ret_version gets its version. KV_ENOTFOUND when the key
 * does not exist (nothing is written). */
int kv_delete(kv_db *db, const void *key, size_t key_len, const struct kv_write_opts *opts,
              uint64_t *ret_version);

/* KV_OP_BLOB_CHUNK and KV_OP_BLOB_PUT are made by the kv_upload calls
 * below (kv_upload_prepare, kv_upload_commit_prepare), never by hand. */
enum kv_op_type { KV_OP_PUT = 1, KV_OP_DELETE = 2, KV_OP_BLOB_CHUNK = 3, KV_OP_BLOB_PUT = 4 };

struct kv_op {
	enum kv_op_type type;
	const void *key;
	size_t key_len;
	const void *value; /* KV_OP_PUT */
	size_t value_len;
	uint64_t if_version; /* KV_ANY_VERSION, 0 = must not exist, or a version */
	uint64_t ttl_ms;     /* as in struct kv_write_opts */
	/* results */
	uint64_t version; /* version given to this op; 0 for a delete of a missing key */
	int status;       /* 0, or why this op made the batch fail */
	uint64_t loc_;    /* private: where a blob chunk was written */
	void *upload_;    /* private: the upload of a blob op */
};

/* Applies n ops all-or-nothing, in order (a later op sees an earlier one),
 * durable together. A delete of a missing key is a no-op (version 0). On a
 * failed condition nothing is written, the call returns KV_ECONFLICT (or
 * KV_EMAXKEYS, KV_EKEYSIZE…) and the failing op's status says which.
 * Errors: KV_ECONFLICT, KV_EMAXKEYS, KV_EKEYSIZE, KV_EVALSIZE, KV_EREADONLY,
 * -EINVAL (n is 0 or the ops are over 1 GiB), -ENOSPC, -EIO. */
int kv_batch(kv_db *db, struct kv_op *ops, size_t n);

/* ---- reads ------------------------------------------------------------- */

struct kv_read_opts {
	uint64_t version; /* exact version; 0 = newest */
	uint64_t as_of;   /* newest version ≤ as_of; 0 = no bound */
};

struct kv_value {
	void *data; /* value bytes; release with kv_value_release() */
	size_t len;
	uint64_t version;
	uint64_t timestamp_ms; /* wall clock at the write */
	uint64_t expiry_ms;    /* 0 = none */
	bool blob;             /* the value is a blob: data is NULL, len 0 (kv_blob_read) */
	uint64_t blob_size;    /* with blob: its size in bytes */
	void *priv_;
};

/* Reads the newest value, the value at an exact version, or the newest value
 * as of a version. A tombstone or an expired value is KV_ENOTFOUND. A version
 * older than the retained history is KV_ECOMPACTED; a record failing its
 * checksum is KV_ECORRUPT. opts may be NULL.
 * Errors: KV_ENOTFOUND, KV_ECOMPACTED, KV_ECORRUPT (also a record that cannot
 * be read: an I/O error, a lost segment), KV_EKEYSIZE, -ENOMEM. */
int kv_get(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
           struct kv_value *ret);
void kv_value_release(struct kv_value *v);

struct kv_version {
	uint64_t version;
	uint64_t timestamp_ms;
	uint64_t expiry_ms;
	bool tombstone;
	void *data; /* value when requested, else NULL (always NULL for a blob) */
	size_t len;
	bool blob;          /* the version is a blob */
	uint64_t blob_size; /* with blob: its size in bytes */
	void *priv_;
};

/* Lists up to limit versions of key, newest first, starting below version
 * `before` (0 = from the newest). Expired versions are skipped. *ret_list is
 * malloc'd; free with kv_versions_free(). An unknown key gives 0 versions.
 * *ret_truncated is set when older history was dropped by merge.
 * Errors: KV_EKEYSIZE, KV_ECORRUPT (a record on the chain cannot be read),
 * -ENOMEM. */
int kv_versions(kv_db *db, const void *key, size_t key_len, uint32_t limit, uint64_t before,
                bool with_values, struct kv_version **ret_list, size_t *ret_count,
                bool *ret_truncated);
void kv_versions_free(struct kv_version *list, size_t count);

/* ---- blobs ------------------------------------------------------------- */

/*
 * A value too large for one write is stored as a blob. An upload appends
 * the bytes as chunk records of chunk_size bytes (each compressed alone by
 * the database's codec) while it goes on; its commit writes a descriptor
 * naming every chunk, as a new version of the key, and only then is
 * anything of it visible. An upload never committed (closed, its writer
 * gone, the process killed) leaves chunks no descriptor names, which merge
 * reclaims. A read of a byte range fetches only the chunks it covers.
 *
 * kv_get, kv_versions and scans give no bytes for a blob: they say it is
 * one and its size (kv_value.blob, .blob_size). Deletes, TTLs, conditions
 * (if_version), retention, compaction and merge treat a blob like any value.
 *
 * Threads: an upload is used by one thread at a time. Reads may run from
 * any thread, as kv_get.
 */
#define KV_BLOB_CHUNK_DEFAULT (64u << 10)  /* 64 KiB */
#define KV_BLOB_CHUNK_MIN (4u << 10)       /* 4 KiB */
#define KV_BLOB_CHUNK_MAX (4u << 20)       /* 4 MiB */
#define KV_BLOB_SIZE_MAX (1ull << 40)      /* 1 TiB */
#define KV_BLOB_CHUNKS_MAX (1u << 21)      /* chunks of one blob */

typedef struct kv_upload kv_upload;
struct kv_req; /* "non-blocking writes" below */

struct kv_blob_info {
	uint64_t size;         /* bytes */
	uint32_t chunk_size;   /* every chunk but the last holds this many */
	uint32_t chunks;
	uint64_t xxh64;        /* XXH64, seed 0, of the whole blob */
	uint64_t stored_bytes; /* its chunk records as stored */
	uint64_t version;
	uint64_t timestamp_ms;
	uint64_t expiry_ms;    /* 0 = none */
};

/* Starts an upload of a blob for key. chunk_size 0: KV_BLOB_CHUNK_DEFAULT.
 * Errors: KV_EKEYSIZE, -EINVAL (chunk_size out of range), KV_EREADONLY,
 * KV_ECLOSED, -ENOMEM. */
int kv_upload_open(kv_db *db, const void *key, size_t key_len, uint32_t chunk_size,
                   kv_upload **ret);
/* Bytes taken so far. */
uint64_t kv_upload_size(const kv_upload *u);
/* Frees the upload; an upload not committed leaves nothing visible. NULL ok.
 * Every upload of a database is closed before kv_close. */
void kv_upload_close(kv_upload *u);

/* Blocking form (not for an external_loop database's own loop thread). */
/* Takes len more bytes; whole chunks are written now (not synced: the
 * commit makes them durable with the blob). Errors: -EFBIG (past
 * KV_BLOB_SIZE_MAX or KV_BLOB_CHUNKS_MAX chunks), -EBADFD (an earlier
 * write of the upload failed, or it is committed), the write path's errors
 * (KV_EREADONLY, -ENOSPC, -EIO). */
int kv_upload_write(kv_upload *u, const void *data, size_t len);
/* Writes the last chunk and the descriptor, durable as the database's sync
 * mode promises, and gives its version. opts: if_version and ttl_ms as for
 * kv_put (NULL: none). After it the upload can only be closed. Errors:
 * kv_upload_write's, KV_ECONFLICT, KV_EMAXKEYS. */
int kv_upload_commit(kv_upload *u, const struct kv_write_opts *opts, uint64_t *ret_version);

/* Non-blocking form, for a loop that submits requests with kv_submit.
 * At most one request of an upload is in flight; req->ops point into the
 * upload (valid until the next call on it). */
/* Takes len bytes (copied) and fills *req with ops writing the whole
 * chunks they complete; req->n is 0 when none is complete yet. Errors:
 * -EFBIG, -EBADFD, -EBUSY (a request is in flight), -ENOMEM. */
int kv_upload_prepare(kv_upload *u, const void *data, size_t len, struct kv_req *req);
/* Fills *req with the commit: the last, partial chunk (if any) and the
 * descriptor, as one atomic request. Errors: -EBADFD, -EBUSY, -ENOMEM. */
int kv_upload_commit_prepare(kv_upload *u, const struct kv_write_opts *opts,
                             struct kv_req *req);
/* Tells the upload how its request ended (its done() status). A failed
 * chunk write fails the upload (-EBADFD from then on, nothing visible); a
 * commit that ended with 0 makes it committed, with *ret_version (may be
 * NULL) its version; a commit refused by its condition (KV_ECONFLICT,
 * KV_EMAXKEYS) leaves it failed too. Returns the status. */
int kv_upload_written(kv_upload *u, struct kv_req *req, int status, uint64_t *ret_version);

/* Reads a blob at the version opts asks for (NULL: the newest). Errors: as
 * kv_get, and KV_ENOTBLOB (the value is not a blob). */
int kv_blob_info(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
                 struct kv_blob_info *ret);
/* Reads up to len bytes from offset into buf: *ret_n is less than len only
 * at the blob's end (0 at or past it). *ret_info (may be NULL) gets the
 * blob's info, so a reader can ask for that exact version next time.
 * Errors: as kv_blob_info; KV_ECORRUPT when a chunk it needs is damaged. */
int kv_blob_read(kv_db *db, const void *key, size_t key_len, const struct kv_read_opts *opts,
                 uint64_t offset, void *buf, size_t len, size_t *ret_n,
                 struct kv_blob_info *ret_info);

/* ---- scans ------------------------------------------------------------- */

struct kv_scan_opts {
	const void *start; /* inclusive lower bound; NULL = first key */
	size_t start_len;
	const void *end; /* exclusive upper bound; NULL = past the last key */
	size_t end_len;
	const void *prefix; /* only keys beginning with these bytes; NULL = any */
	size_t prefix_len;
	uint64_t limit; /* 0 = no limit */
	bool reverse;
	bool keys_only;
	uint64_t as_of; /* read as of this version; 0 = the version when the iterator opened */
};

struct kv_entry {
	const void *key; /* valid until the next kv_iter_next()/kv_iter_close() */
	size_t key_len;
	const void *value; /* NULL with keys_only */
	size_t value_len;
	uint64_t version;
	uint64_t timestamp_ms; /* 0 with keys_only */
	uint64_t expiry_ms;
	bool blob;          /* a blob: value is NULL (not with keys_only: false there) */
	uint64_t blob_size; /* with blob: its size in bytes */
};

typedef struct kv_iter kv_iter;

/* Opens an ordered (bytewise) iterator. It reads a consistent snapshot — the
 * database as of opts->as_of or as of the moment it opened — and stays valid
 * while writes and merges go on: merge keeps the versions an open iterator
 * still needs. opts may be NULL (everything, forward).
 * Errors: KV_ECOMPACTED (as_of below the compact revision), KV_EKEYSIZE (a
 * bound longer than a key can be), -ENOMEM. */
int kv_iter_open(kv_db *db, const struct kv_scan_opts *opts, kv_iter **ret);
/* 0 and *ret filled, KV_EEND when done, or an error (KV_ECORRUPT…). */
int kv_iter_next(kv_iter *it, struct kv_entry *ret);
/* The version the iterator reads at. */
uint64_t kv_iter_version(const kv_iter *it);
void kv_iter_close(kv_iter *it);

/* ---- maintenance ------------------------------------------------------- */

#define KV_SYNC_BUCKETS  15 /* kv_sync_bucket_us's bounds, and one above them */
#define KV_BATCH_BUCKETS 10 /* kv_batch_bucket_max's bounds, and one above them */
extern const uint64_t kv_sync_bucket_us[KV_SYNC_BUCKETS - 1];
extern const uint32_t kv_batch_bucket_max[KV_BATCH_BUCKETS - 1];

struct kv_stats {
	uint64_t keys;           /* live keys (tombstones excluded; expired keys until merged) */
	uint64_t tombstones;     /* deleted keys still indexed */
	uint64_t live_bytes;     /* bytes of the newest record of every key */
	uint64_t dead_bytes;     /* bytes of everything else in the log */
	uint64_t disk_bytes;     /* segment bytes on disk */
	uint32_t segments;
	uint64_t keydir_bytes;   /* memory held by the key directory */
	uint64_t tombstone_bytes;   /* of live_bytes, the deleted keys' tombstones */
	uint64_t evictions;         /* keys evicted (KV_EVICT_OLDEST) since open */
	uint64_t evict_order_bytes; /* memory of the write order KV_EVICT_OLDEST keeps */
	uint64_t last_version;
	uint64_t compact_revision;
	uint64_t merges;         /* merges completed since open */
	uint64_t batches;        /* write batches (group commits) since open */
	uint64_t batched_writes; /* writes carried by them */
	uint64_t syncs;          /* fdatasync calls on the log since open */
	/* Values of the puts written since open: their bytes as given
	 * (logical), as stored (after compression, the codec's 4-byte length
	 * prefix included), and how many were stored compressed. */
	uint64_t value_logical_bytes;
	uint64_t value_stored_bytes;
	uint64_t values_compressed;
	/* How long those fdatasyncs took: under KV_SYNC_ALWAYS a batch's write
	 * and its fdatasync together (one submission, from its start to its
	 * completion), otherwise the fdatasync alone. sync_hist[i] counts the
	 * ones of at most kv_sync_bucket_us[i] (and above the bucket before);
	 * the last bucket, those above every bound. Not cumulative. */
	uint64_t sync_us_sum;
	uint64_t sync_hist[KV_SYNC_BUCKETS];
	/* Batches by the writes they carried: batch_hist[i] counts those of at
	 * most kv_batch_bucket_max[i] writes (above the bucket before); the
	 * last, larger ones. */
	uint64_t batch_hist[KV_BATCH_BUCKETS];
	bool read_only;          /* set after a failed fsync */
	bool io_uring;           /* io_uring in use (false: pread/pwrite) */
};
/* Always 0. */
int kv_stats(kv_db *db, struct kv_stats *ret);

/* Values written from now on are stored with codec at level (as
 * kv_options.compression and compression_level); records already written
 * keep theirs. 0, or -EINVAL (an unknown codec or a level it does not
 * take). Takes effect with the next batch formed. */
int kv_set_compression(kv_db *db, enum kv_codec codec, int level);

/* Rewrites all sealed segments, keeping what is live and within retention.
 * Runs on the calling thread; reads and writes go on meanwhile, paused only
 * for the swaps. If a merge is running, waits for it, then merges. A merge
 * that fails (-ENOMEM, an I/O error) stops and leaves readable everything it
 * found, an open iterator's versions included.
 * Errors: KV_ECORRUPT (a segment is lost: merge would erase the evidence),
 * -ENOMEM, -ENOSPC, -EIO. */
int kv_merge(kv_db *db);

/* Drops history before revision: afterwards a read as of a version older than
 * revision gives KV_ECOMPACTED. Persists the revision, then merges.
 * Errors: -EINVAL (revision above the last version), kv_merge's, and -EIO or
 * -ENOSPC writing META. */
int kv_compact(kv_db *db, uint64_t revision);

/* Segment files are opened on demand and closed least recently used first
 * once this many are open across all databases of the process (default: half
 * of RLIMIT_NOFILE). 0 restores the default. Always 0. */
int kv_set_open_files_budget(size_t n);
/* Segment files open right now, in the whole process. */
size_t kv_open_segment_files(void);
/* The budget above as it stands (the default once decided). */
size_t kv_open_files_budget(void);

/* Reads every file of the database at path without changing anything and
 * calls fn for each damaged thing found: a record failing its checksum, a
 * compressed value that does not decompress, damaged bytes, a torn end, a damaged segment header, merge commit or META,
 * a sealed segment that is gone, unreadable or shorter than when it was
 * sealed. Also, as notes (damage false), what the next open rebuilds or
 * removes: a hint file that is damaged or stale (hints are a cache), a
 * hint or segment a merge retired. The database must not be open
 * (KV_ELOCKED). */
struct kv_check_item {
	char file[64];    /* file name in the directory */
	uint64_t off;     /* where the damage starts */
	uint64_t len;     /* how many bytes (0: the file as a whole) */
	const char *what; /* one line */
	bool damage;      /* false: a note, nothing is lost */
};
typedef void (*kv_check_fn)(void *arg, const struct kv_check_item *it);
struct kv_check_summary {
	uint32_t segments;
	uint32_t hints;
	uint64_t records; /* records that check out */
	uint32_t damaged; /* damage items reported */
	uint64_t damaged_bytes;
	uint32_t notes;   /* items that are not damage */
};
/* Errors: KV_ELOCKED (open in a process), -ENOENT and other -errno opening
 * the directory, -ENOMEM. Damage is not an error: it is reported to fn. */
int kv_check(const char *path, kv_check_fn fn, void *arg, struct kv_check_summary *ret);

/* Makes every acknowledged write durable now (useful under sync=interval|none). */
int kv_sync(kv_db *db);

/* ---- block devices -----------------------------------------------------------
 *
 * A raw block device (or a regular file standing in for one) holds every
 * tenant of a store in fixed-size extents, with no file system in between
 * (docs/FORMAT.md, "Device layout"): two superblock copies, a catalog in two
 * slots, and extents each headed by a block that names its owner.
 */

#define KV_DEV_EXTENT_SIZE_DEFAULT (64ull << 20) /* 64 MiB */
#define KV_DEV_EXTENT_SIZE_MIN (1ull << 20)      /* 1 MiB */
#define KV_DEV_CACHE_DEFAULT (256ull << 20)      /* 256 MiB */

struct kv_dev_format_options {
	uint64_t extent_size; /* a power of two; 0: KV_DEV_EXTENT_SIZE_DEFAULT */
	bool force;           /* format over a device that carries a known signature */
	uint32_t nodes;       /* kvd nodes that share it (docs/SCALEOUT.md), 1..KV_DEV_NODES_MAX;
	                         0: 1 */
};
#define KV_DEV_NODES_MAX 64

/* How the device backend makes a synced append durable.
 * KV_DEV_SYNC_DSYNC (the default): one write with RWF_DSYNC, which the
 * kernel turns into a FUA write, or a write and a cache flush where the
 * device has no FUA. KV_DEV_SYNC_FLUSH: the write linked to a separate
 * fdatasync of the device, both in one submission (measured slower: the
 * flush runs on one of io_uring's worker threads; docs/BENCHMARKS.md §7). */
enum kv_dev_sync {
	KV_DEV_SYNC_DSYNC = 0,
	KV_DEV_SYNC_FLUSH = 1,
};

/* Formats device: refuses one that carries a file system, a partition
 * table, LVM or another kvd (libblkid's probe) unless o->force, then zeroes
 * its first and last MiB and writes the catalog and the superblocks (the
 * end copy first). On failure err holds one line saying why.
 * Errors: KV_EREFUSED (a signature, err names it), -EINVAL (extent size,
 * a device too small), -EBUSY / KV_ELOCKED (in use), -errno. */
int kv_dev_format(const char *device, const struct kv_dev_format_options *o, char *err,
                  size_t errlen);

/* What kv_dev_check found, one item per finding (damage false: a note). */
struct kv_dev_check_item {
	char where[96];   /* "superblock 0", "catalog slot 1", "extent 12", "tenant a seg 3"… */
	uint64_t off;     /* byte offset on the device */
	const char *what; /* one line */
	bool damage;
};
typedef void (*kv_dev_check_fn)(void *arg, const struct kv_dev_check_item *it);
struct kv_dev_check_summary {
	uint32_t tenants;
	uint32_t extents_used;
	uint32_t extents_free;
	uint64_t records; /* records that check out */
	uint32_t damaged; /* damage items reported */
	uint32_t notes;
};
/* Reads the whole device without changing it: both superblock copies, both
 * catalog slots (of every node, on a shared device), every extent header and every record of every tenant.
 * KV_ELOCKED while a kvd serves it. Damage is reported to fn, not an error. */
int kv_dev_check(const char *device, kv_dev_check_fn fn, void *arg,
                 struct kv_dev_check_summary *ret);


/* ---- the multi-tenant store -------------------------------------------------
 *
 * A store is a directory of named tenant databases (tenants/<name>/), each
 * with its own options, versions and files. A tenant is active (its database
 * open, its key directory in memory) or passive (closed: hint files written,
 * key directory freed, files closed). kv_store_get() activates a passive
 * tenant transparently; kv_store_maintain() passivates tenants idle for
 * idle_timeout_s and, while the key directories of active tenants exceed
 * memory_budget, the least recently used ones. The tenant "default" always
 * exists. All calls are thread-safe.
 */

typedef struct kv_store kv_store;
typedef struct kv_tenant kv_tenant;

#define KV_TENANT_NAME_MAX 64

struct kv_tenant_config {
	enum kv_sync sync;
	uint32_t sync_interval_ms;
	uint32_t history_versions;
	uint64_t default_ttl_ms; /* applied by the caller to puts without a TTL */
	uint64_t max_keys;
	enum kv_codec compression;
	int compression_level;   /* as in kv_options */
	uint64_t max_bytes;      /* as in kv_options */
	enum kv_evict evict;     /* as in kv_options */
};
void kv_tenant_config_init(struct kv_tenant_config *c);

struct kv_store_options {
	struct kv_options base;  /* every tenant database starts from these */
	uint64_t memory_budget;  /* bytes of key directories (and evict=oldest write orders) of
	                            active tenants; 0: none */
	uint32_t idle_timeout_s; /* passivate after this long unused; 0: never */
	uint32_t max_active;     /* active tenants at most; 0: from the open-file budget */
	bool auto_create;        /* a get of an unknown tenant creates it with default config */
	uint32_t busy_wait_ms;   /* passivate/drop wait this long for a tenant in use; 0: -EBUSY now */
	/* Called after a tenant was activated (not under the store's lock), so
	 * the caller can say what recovery found. */
	void (*activated)(void *arg, const char *tenant, kv_db *db, uint64_t us);
	void *activated_arg;
	struct kv_tenant_config defaults;
	/* A block device (or a file used as one) formatted by kv_dev_format:
	 * the store keeps every tenant in its extents instead of directories
	 * under dir (kv_store_open's dir is then unused and may be NULL). NULL:
	 * the files backend. */
	const char *device;
	/* Bytes of the device backend's read cache; 0: KV_DEV_CACHE_DEFAULT. */
	uint64_t device_cache_bytes;
	/* How an append under sync=always becomes durable on the device. */
	enum kv_dev_sync device_sync;
	/* On a device formatted for several nodes: which one this store is,
	 * 1..nodes (0: 1). Each node writes only its own catalog slots and
	 * allocates only its own extents (docs/SCALEOUT.md). */
	uint32_t device_node;
	/* On a shared device: how long an extent of this node's range that
	 * another node stopped using waits before it is used again (reads that
	 * node still had in flight finish first). 0: 10 s. */
	uint32_t device_grace_ms;
};
void kv_store_options_init(struct kv_store_options *o);

/* KV_ELOCKED when another process has the store open. A tenant whose
 * TENANT file is damaged, not a regular file, or missing from a directory
 * that holds a database does not stop the store: it is listed as refused,
 * every use of it gets KV_EREFUSED, and it cannot be created again over its
 * files (TenantDrop still removes it). */
int kv_store_open(const char *dir, const struct kv_store_options *o, kv_store **ret);
/* Closes every active tenant. NULL ok. Errors: the first kv_close error (every
 * tenant is closed all the same). */
int kv_store_close(kv_store *s);

/* Whether the len bytes at name are a tenant name: 1..64 bytes of
 * [A-Za-z0-9._-], not starting with '.' (so a NUL byte anywhere in them
 * makes them none). */
bool kv_tenant_name_valid(const char *name, size_t len);

/* -EEXIST, -EINVAL (name or config) */
int kv_store_create(kv_store *s, const char *name, const struct kv_tenant_config *c);
/* Removes the tenant and its files. -ENOENT, -EPERM ("default"), -EBUSY (still
 * in use after busy_wait_ms). */
int kv_store_drop(kv_store *s, const char *name);

struct kv_tenant_state {
	char name[KV_TENANT_NAME_MAX + 1];
	bool active;
	bool refused; /* see kv_store_why_refused */
};
/* Sorted by name; free() the list. Errors: -ENOMEM. */
int kv_store_list(kv_store *s, struct kv_tenant_state **ret, size_t *ret_count);

struct kv_tenant_info {
	char name[KV_TENANT_NAME_MAX + 1];
	bool active;
	uint64_t idle_ms;
	struct kv_tenant_config config;
	struct kv_stats stats;       /* live when active; as of passivation when passive */
	uint64_t activations;
	uint64_t last_activation_ms; /* wall clock; 0: never */
	uint64_t last_activation_us; /* how long it took */
	uint32_t in_use;             /* references held right now */
};
/* -ENOENT, KV_EREFUSED */
int kv_store_info(kv_store *s, const char *name, struct kv_tenant_info *ret);

/* Why a tenant is refused, one line naming the file (and the line in it):
 * "tenants/w/TENANT: line 3: unknown setting 'histroy'". 0 with the reason in
 * buf (cut to size); -ENOENT when there is no such tenant or it is not
 * refused. */
int kv_store_why_refused(kv_store *s, const char *name, char *buf, size_t size);

/* Reads the TENANT file of the tenant directory dir exactly as
 * kv_store_open does, changing nothing; for `kvd --check`. Settings the file
 * does not give come from defaults (NULL: kv_tenant_config_init's).
 * 0: sound (with or without a checksum line), *ret_config filled.
 * -ENOENT: dir has no TENANT and nothing of a database (not a tenant).
 * KV_EREFUSED: damaged, not a regular file, unreadable, or missing while dir
 * holds a database; a one-line reason in why (without the file's name).
 * -errno: dir cannot be opened, or the process is out of descriptors or
 * memory (-EMFILE, -ENFILE, -ENOMEM: a shortage, not damage). */
int kv_tenant_file_read(const char *dir, const struct kv_tenant_config *defaults, char *why,
                        size_t why_size, struct kv_tenant_config *ret_config);

/* A reference on a tenant, activating it first when passive (-ENOENT when it
 * does not exist and auto_create is off, KV_EREFUSED when it is refused, or
 * kv_open's errors). Hold it while using the database. */
int kv_store_get(kv_store *s, const char *name, kv_tenant **ret);
void kv_store_put(kv_store *s, kv_tenant *t);
/* Like kv_store_get while the tenant is active (the same reference, a use);
 * -EAGAIN when kv_store_get would have to create, activate or wait for it
 * (an event loop hands that to another thread), -ENOENT and -EINVAL as
 * kv_store_get. Never blocks on I/O. */
int kv_store_get_ready(kv_store *s, const char *name, kv_tenant **ret);
/* Like kv_store_get, but never activates (-EAGAIN when the tenant is
 * passive) and does not count as a use: release it with
 * kv_store_put_unused, so maintenance does not keep idle tenants young. */
int kv_store_get_active(kv_store *s, const char *name, kv_tenant **ret);
void kv_store_put_unused(kv_store *s, kv_tenant *t);
kv_db *kv_tenant_db(kv_tenant *t);
const struct kv_tenant_config *kv_tenant_config_of(kv_tenant *t);
const char *kv_tenant_name(kv_tenant *t);

/* -EBUSY while references are still held after busy_wait_ms; -ENOENT.
 * kv_store_activate: also KV_EREFUSED and kv_open's errors. */
int kv_store_passivate(kv_store *s, const char *name);
int kv_store_activate(kv_store *s, const char *name, uint64_t *ret_us);

/* Idle timeout and memory budget; *ret_passivated (if not NULL) counts them.
 * Always 0 (a tenant that cannot be passivated now is tried again later). */
int kv_store_maintain(kv_store *s, uint32_t *ret_passivated);
/* Changes the reloadable settings. */
void kv_store_set_limits(kv_store *s, uint64_t memory_budget, uint32_t idle_timeout_s);

/* ---- a device shared by several nodes (docs/SCALEOUT.md) -----------------
 *
 * On a device formatted with kv_dev_format_options.nodes > 1, every node
 * keeps its own catalog; the entry of a tenant with the highest epoch, over
 * every node's catalog, is the tenant. Epochs come from the caller (kvd:
 * the etcd revision of its claim) and only grow. On such a device a tenant
 * is written only after kv_store_claim; kv_store_disown stops that. */

/* Whether the store's device is shared (formatted for more than one node). */
bool kv_store_shared(kv_store *s);

/* Makes this node the tenant's owner at epoch, which must be above every
 * epoch the device records for it. Reads every node's catalog; when
 * another node's entry is the newest, the tenant is taken over from it:
 * its segment that was open is sealed where its records end, and this node
 * never writes the old owner's extents (its writes go to new extents under
 * the new epoch). The tenant is then in the store and active: recovery
 * has sealed the old owner's open segment durably, so nothing a stale
 * owner appends to it later is ever read. When no node
 * has it, it is not created ("default" is), but a later kv_store_create
 * or auto-creation creates it under epoch. A tenant that is active here is
 * passivated first (its database reopened from the device).
 * Not shared: 0, nothing done. Errors: -ESTALE (the device records an
 * epoch ≥ epoch for it), -EBUSY (in use here after busy_wait_ms), -errno. */
int kv_store_claim(kv_store *s, const char *name, uint64_t epoch);

/* This node gives the tenant up (name NULL: every tenant, for fencing):
 * from now on every write of it to the device fails with -ESTALE until
 * kv_store_claim takes it again. Its catalog entry stays until a newer
 * one supersedes it. Not shared: 0, nothing done. */
int kv_store_disown(kv_store *s, const char *name);

/* A tenant as the shared device records it: the newest entry's node and epoch. */
struct kv_dev_tenant {
	char name[KV_TENANT_NAME_MAX + 1];
	uint32_t node;
	uint64_t epoch;
};
/* Every tenant of the device (dropped ones not), read from every node's
 * catalog now; sorted by name; free() the list. Not shared: -ENOTSUP. */
int kv_store_device_tenants(kv_store *s, struct kv_dev_tenant **ret, size_t *ret_n);
/* One of them: 0, -ENOENT (none, or dropped), -ENOTSUP (not shared). */
int kv_store_device_find(kv_store *s, const char *name, struct kv_dev_tenant *ret);

struct kv_store_stats {
	uint64_t tenants;
	uint64_t active;
	uint64_t keydir_bytes; /* active tenants (their evict_order_bytes included) */
	uint64_t activations;
	uint64_t passivations;
	/* On a block device (kv_store_options.device), else 0: */
	bool device;
	uint64_t device_extents, device_extents_free, device_extent_size;
	uint64_t device_cache_bytes, device_cache_hits, device_cache_misses;
	uint32_t device_superblocks_damaged; /* of its 2 superblock copies, at open */
	uint32_t device_extents_reclaimed;   /* taken but named by nothing at open (a crash
	                                        during a merge): given back */
	uint32_t device_nodes, device_node;  /* nodes it is formatted for; this store's */
};
/* Always 0. */
int kv_store_stats(kv_store *s, struct kv_store_stats *ret);

/* ---- backups (docs/BACKUP.md) ---------------------------------------------
 *
 * A backup is a directory in the files backend's layout (docs/FORMAT.md)
 * holding the database as it was at one version: what recovery would find
 * had every write before that moment reached the disk and none after it.
 * Sealed segments, which never change, are hard-linked where the directory
 * is on the same file system (copied elsewhere, and always from a device);
 * the active segment is copied up to where its last write ended. Writes go
 * on meanwhile; merges of the database wait until the backup is done. */

struct kv_backup_info {
	uint64_t version;         /* the backup holds every write up to it and nothing after */
	uint32_t segments;        /* segments in the backup */
	uint32_t segments_linked; /* of them, hard links to the database's own */
	uint64_t bytes_linked;    /* their bytes */
	uint64_t bytes_copied;    /* bytes written: copied segments, hints, metadata */
	uint32_t files;           /* files in the backup */
	uint64_t elapsed_us;
};

/* Writes a backup of db into dir, which must not exist (its parent must)
 * or be an empty directory. It ends with the blob BACKUP ("version=V"),
 * written once everything else is durable; on failure what was written
 * into dir is removed (a crash leaves a directory without BACKUP, which
 * kv_store_restore refuses).
 * Errors: -ENOTEMPTY (dir holds something), -ENOTDIR, -ENOENT (no parent),
 * KV_ECLOSED, -ENOMEM, -ENOSPC, -EIO, -errno of the file system. */
int kv_backup(kv_db *db, const char *dir, struct kv_backup_info *ret);

/* kv_backup of the tenant `name` (activated if passive), refusing a dir
 * inside the store's directory (-EINVAL).
 * Errors: kv_backup's, -EINVAL, -ENOENT (no such tenant), KV_EREFUSED,
 * kv_store_get's. */
int kv_store_backup(kv_store *s, const char *name, const char *dir, struct kv_backup_info *ret);

/* Makes the backup in dir the tenant `name` of the store (files or device
 * backend): created with the backup's TENANT settings, its segments,
 * hints and metadata copied in, passive until first used. An existing
 * tenant is refused unless force, which drops it first. META is copied
 * first, so a restore a crash cut short leaves a tenant whose META lists
 * segments it lacks (reported as damage when it opens): restore again with
 * force. A restore that fails otherwise drops what it created.
 * Errors: -EEXIST (without force), -ENOENT (dir is not a whole backup: no
 * TENANT, BACKUP or META), KV_EREFUSED (its TENANT damaged), -ENOTSUP (a device
 * shared by several nodes), -EBUSY (force, the tenant in use),
 * kv_store_create's, -errno. */
int kv_store_restore(kv_store *s, const char *name, const char *dir, bool force);

/* ---- non-blocking form ---------------------------------------------------
 *
 * For an event loop that owns the database (kvd's workers). A request is
 * caller-owned memory that must stay valid until its done() runs. done() runs
 * on the thread that calls kv_process(), once, with the request's status;
 * per-op versions are in ops[i].version.
 *
 *   kv_submit()     queue a request; never blocks on I/O.
 *   kv_event_fd()   becomes readable when kv_process() has something to do.
 *   kv_process()    reap completed I/O, complete requests, start the next
 *                   batch; never waits for I/O (except under KV_IO_PSYNC,
 *                   where the I/O itself runs inline).
 *   kv_tick()       call at least every sync_interval_ms / second: interval
 *                   sync, hint writing; returns 1 when a merge is due.
 */
struct kv_req {
	struct kv_op *ops;
	size_t n;
	void (*done)(struct kv_req *req, int status);
	void *arg;
	/* private */
	struct kv_req *next_;
	int status_;
	uint32_t flags_;
};

/* 0: the request is queued and its outcome comes to done(). Refused at once,
 * done() never called: -EINVAL (no request or no done(), no ops, an op of
 * no known type), KV_EKEYSIZE, KV_EVALSIZE, KV_EBATCHSIZE, KV_EREADONLY,
 * KV_ECLOSED (the database is closing). */
int kv_submit(kv_db *db, struct kv_req *req);
/* The event descriptor of an external_loop database (-1 otherwise). */
int kv_event_fd(kv_db *db);
/* 0, or -errno reading the event fd (the requests' own errors go to done()). */
int kv_process(kv_db *db);
/* 1 when a merge is due (the caller runs kv_merge), 0 otherwise, or -EIO
 * from the interval sync (the database is then read-only) or from writing
 * a hint. */
int kv_tick(kv_db *db);

#ifdef __cplusplus
}
#endif
#endif
