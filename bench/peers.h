/*
 * peers.h — the databases `kvbench engine` measures, behind one interface.
 *
 * A backend opens a database in a directory with the benchmark's fairness
 * settings (each peer_*.c says what it sets, and its `settings` line repeats
 * it for the report header) and offers put, get and a forward scan to worker
 * threads. A backend whose library was missing at configure time is still
 * listed, with open == NULL: its rows say "not built".
 *
 * Threads: open and close from one thread; worker_init, put, get, get_copy,
 * scan, scan_count, sync and worker_fini from any number of threads at once
 * on one open database, each thread with its own struct peer_worker (sync
 * takes the database).
 *
 * `kvbench ycsb` uses the same backends for its embedded rows; get_copy,
 * scan_count and sync exist for it (YCSB's read-modify-write, its scans of
 * variable-length keys, and sync=interval).
 *
 * Errors: every call returns 0 on success (get: PEER_FOUND or
 * PEER_NOTFOUND) or -1 with a one-line message in the worker's err (open:
 * in its err argument). Bench code prints; backends never do.
 */
#ifndef KV_BENCH_PEERS_H
#define KV_BENCH_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PEER_ERR_MAX 256 /* bytes of an error message, with its NUL */

struct peer; /* an open database of one backend */

struct peer_config {
	const char *path;  /* directory of the database; does not exist yet */
	bool sync;         /* every write durable before it returns */
	uint64_t num;      /* writes the benchmark will make (sizes LMDB's map) */
	size_t key_size;   /* bytes per key */
	size_t value_size; /* bytes per value */
	/* With !sync: a backend whose sync op is NULL syncs this often on its
	 * own (the engine's KV_SYNC_INTERVAL); 0: never. */
	uint32_t sync_interval_ms;
	/* A backend with `device` set (engine-dev) formats this block device
	 * (or regular file) and keeps the database there; path is unused. */
	const char *device;
	uint64_t device_extent_size; /* 0: kv_dev_format's default */
	bool device_force;           /* format over a known signature */
};

struct peer_worker {
	struct peer *db;        /* the database this worker uses */
	void *priv;             /* backend's per-thread state */
	char err[PEER_ERR_MAX]; /* message of the last failure */
};

enum {
	PEER_FOUND = 0,    /* get: value found, *ret_len set */
	PEER_NOTFOUND = 1, /* get: no such key */
};

/* What a scan saw. */
struct peer_scan {
	uint64_t entries; /* entries visited */
	uint64_t wrong;   /* entries whose key or value length was not the expected one */
};

/* Write-path counters, where a backend keeps them (the engine does). */
struct peer_counters {
	uint64_t batches; /* write batches (group commits) */
	uint64_t writes;  /* writes they carried */
	uint64_t syncs;   /* fdatasync calls on the log */
	uint64_t merges;  /* background merges (compactions) completed */
};

struct peer_backend {
	const char *name;     /* as given to --backends */
	const char *settings; /* one line: the configuration open() applies */
	bool device;          /* the database lives on peer_config.device, formatted by open() */

	/* Fills buf with the library's version (and what open found, e.g. the
	 * I/O method); NULL when the backend is not built. */
	void (*version)(char *buf, size_t len);

	/* NULL when not built. */
	int (*open)(const struct peer_config *c, struct peer **ret_db, char *err, size_t errlen);
	/* Closes; NULL ok. */
	void (*close)(struct peer *db);

	/* Optional per-thread setup (w->db set by the caller) and teardown. */
	int (*worker_init)(struct peer_worker *w);
	void (*worker_fini)(struct peer_worker *w);

	int (*put)(struct peer_worker *w, const char *key, size_t key_len, const char *value,
	           size_t value_len);
	/* Reads key; PEER_FOUND with *ret_len the value's length (the value is
	 * fetched and released as the library's usual get does), PEER_NOTFOUND,
	 * or -1. */
	int (*get)(struct peer_worker *w, const char *key, size_t key_len, size_t *ret_len);
	/* Forward scan with the library's iterator from start (NULL: the first
	 * key) up to end exclusive (NULL: the last key), checking every key and
	 * value length against key_size and value_size. */
	int (*scan)(struct peer_worker *w, const char *start, const char *end, size_t key_size,
	            size_t value_size, struct peer_scan *ret);

	/* Optional (kvbench ycsb): reads key as get does and copies the
	 * value's first cap bytes into buf; *ret_len is its full length. */
	int (*get_copy)(struct peer_worker *w, const char *key, size_t key_len, void *buf,
	                size_t cap, size_t *ret_len);
	/* Optional (kvbench ycsb): forward scan of at most count entries from
	 * the first key >= start (start_len bytes, any key lengths); entries
	 * whose value is not value_size bytes count as wrong. */
	int (*scan_count)(struct peer_worker *w, const char *start, size_t start_len,
	                  uint64_t count, size_t value_size, struct peer_scan *ret);
	/* Optional: makes every write that returned durable (fdatasync of the
	 * log); NULL when open() honours sync_interval_ms itself. */
	int (*sync)(struct peer *db, char *err, size_t errlen);

	/* Optional: write-path counters since open. */
	int (*counters)(struct peer *db, struct peer_counters *ret);
	/* Optional: one line about the open database (I/O method…). */
	void (*describe)(struct peer *db, char *buf, size_t len);
};

/* Every backend kvbench knows, built or not, in the default order. */
extern const struct peer_backend *const peer_backends[];
extern const size_t peer_backend_count;

/* The backend called name, or NULL. */
const struct peer_backend *peer_find(const char *name);

/* Whether the backend was built. */
static inline bool peer_built(const struct peer_backend *b)
{
	return b->open != NULL;
}

/* snprintf into err, for messages whose truncation is acceptable. */
void peer_errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
