/*
 * ycsb_backend.h — the databases `kvbench ycsb` drives, behind YCSB's DB
 * interface: read, update, insert and scan(start key, count). A
 * read-modify-write is a read and an update of the same key made by the
 * driver, as YCSB's CoreWorkload makes it (YCSB's DB has no such call).
 *
 * Backends:
 *   kvd-ipc, kvd-tcp   a kvd through libkvclient, over ipc:// or tcp:// (nng),
 *                      or kv+ipc:// or kv+tcp:// (kvd's stream framing) with
 *                      yb_env.stream; the kvd is started once per run (or
 *                      given with --endpoint) and every database is a fresh
 *                      tenant with the run's sync mode;
 *   redis, redis-tcp   a redis-server started for every database (fresh
 *                      directory, AOF on), through hiredis over its Unix
 *                      socket or TCP on 127.0.0.1;
 *   engine, rocksdb, leveldb, lmdb
 *                      embedded, through bench/peers.h, the libraries'
 *                      adapters below this interface (`kvbench engine`
 *                      drives them through here too);
 *   engine-dev         the engine in a store on yb_env.device, formatted for
 *                      every database (not in yb_backends: it needs a
 *                      device, `kvbench ycsb --device`; yb_find knows it).
 * Each backend's .c section says exactly which calls it makes.
 *
 * Threads: open and close from one thread; worker_init, the operations and
 * worker_fini from any number of threads at once, each with its own struct
 * yb_worker.
 *
 * Errors: 0 on success (read: YB_FOUND or YB_NOTFOUND), or -1 with a
 * one-line message in the worker's err (open, close: in their err
 * argument). Nothing here prints.
 */
#ifndef KV_BENCH_YCSB_BACKEND_H
#define KV_BENCH_YCSB_BACKEND_H

#include "bench.h"
#include "kvdrun.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YB_ERR_MAX  256  /* bytes of an error message, with its NUL */
#define YB_PATH_MAX 4096 /* bytes of a path */

enum yb_sync {
	YB_SYNC_ALWAYS,   /* a write returns once it is on stable storage */
	YB_SYNC_INTERVAL, /* written at once, synced every sync_interval_ms */
	YB_SYNC_NONE,     /* written at once, never synced by the benchmark */
};

/* What the backends of one run share: paths, and the processes started. */
struct yb_env {
	/* set by the caller */
	const char *base;       /* the run's directory */
	const char *kvd_path;   /* kvd binary to start; NULL: not found */
	const char *endpoint;   /* --endpoint: an existing kvd, not started or stopped here */
	const char *redis_path; /* redis-server binary; NULL: not found */
	bool stream;            /* reach the kvd started here over kv+ipc:// and kv+tcp://
	                           (kvd's stream framing), not nng's ipc:// and tcp:// */
	const char *device;     /* engine-dev: the block device (or file) it formats; NULL:
	                           engine-dev cannot run */
	bool device_force;      /* the first format goes over a known signature */
	bool device_formatted;  /* set once a format of this run succeeded: later ones
	                           force, over the run's own format */
	/* the kvd, started on first use and stopped by yb_env_fini */
	struct kvd_run kvd; /* its settings, URLs, command line and process */
	bool kvd_started;
	char kvd_version[32]; /* as StatsDaemon reports */
	uint64_t kvd_workers;
	/* the last redis-server started */
	char redis_command[4096];
	char redis_version[32];
	unsigned seq; /* databases opened so far (names of tenants and directories) */
};

/* Stops the kvd this run started, if any: 0 when it exited 0, else -1 with
 * err filled. */
int yb_env_fini(struct yb_env *env, char *err, size_t errlen);

/* The URL of the run's kvd (started on first use, as the kvd backends
 * start it) for its tcp (true) or ipc listener; --endpoint's URL when one
 * was given. *ret lives as long as env. 0, or -1 with err filled. Every
 * benchmark that reaches kvd takes its URL from here. */
int yb_kvd_url(struct yb_env *env, bool tcp, const char **ret, char *err, size_t errlen);

struct yb_config {
	enum yb_sync sync;
	uint32_t sync_interval_ms; /* YB_SYNC_INTERVAL's period */
	unsigned threads;          /* workers that will use the database at once */
	uint64_t records;          /* records it will hold at most (sizes LMDB's map) */
	size_t key_size;           /* bytes of a key, about */
	size_t value_size;         /* bytes of a value */
	uint32_t history;          /* kvd: versions a tenant keeps per key; 0: kvd's default */
	const char *name;          /* kvd: tenant names start with it; NULL: "ycsb" */
	const char *path;          /* embedded: the database's directory, not there yet; NULL: one
	                              of its own in the run's directory */
};

/* Write-path counters of a database since it was opened. */
struct yb_counters {
	uint64_t batches; /* group commits */
	uint64_t writes;  /* write requests they carried */
	uint64_t syncs;   /* fdatasyncs of the log */
	uint64_t merges;  /* background merges (compactions) completed, where counted */
};

struct yb_db; /* one fresh, empty database of one backend */

struct yb_worker {
	struct yb_db *db;
	void *priv;           /* the backend's per-thread state */
	char err[YB_ERR_MAX]; /* message of the last failure */
};

enum {
	YB_FOUND = 0,    /* read: the record exists, *ret_len set */
	YB_NOTFOUND = 1, /* read: no such record */
};

struct yb_backend {
	const char *name; /* as given to --backend */
	const char *kind; /* "kvd", "redis" or "embedded" */
	const char *peer; /* embedded: the bench/peers.h backend's name */

	/* NULL when the backend can run here, else why not ("not built"…). */
	const char *(*unavailable)(const struct yb_backend *b, const struct yb_env *env);

	/* A fresh, empty database with c's settings. */
	int (*open)(const struct yb_backend *b, struct yb_env *env, const struct yb_config *c,
	            struct yb_db **ret, char *err, size_t errlen);
	/* Closes and removes the database; stops its server. -1 (err filled)
	 * when the server did not exit 0 or a background sync failed. NULL ok. */
	int (*close)(struct yb_db *db, char *err, size_t errlen);
	/* One line for the report: versions and every setting applied. */
	void (*describe)(struct yb_db *db, char *buf, size_t len);

	int (*worker_init)(struct yb_worker *w); /* w->db set by the caller */
	void (*worker_fini)(struct yb_worker *w);

	/* The whole record. buf NULL: the value is fetched and released as the
	 * library's usual read does and only its length returned; else its
	 * first cap bytes are copied into buf. */
	int (*read)(struct yb_worker *w, const char *key, size_t key_len, void *buf, size_t cap,
	            size_t *ret_len);
	/* Writes the whole record (YCSB's update and insert). */
	int (*update)(struct yb_worker *w, const char *key, size_t key_len, const void *value,
	              size_t value_len);
	int (*insert)(struct yb_worker *w, const char *key, size_t key_len, const void *value,
	              size_t value_len);
	/* At most count records in key order from the first key >= start, each
	 * value fetched; *ret_records is how many, *ret_wrong how many had a
	 * value of another length than value_size. */
	int (*scan)(struct yb_worker *w, const char *start, size_t start_len, uint64_t count,
	            size_t value_size, uint64_t *ret_records, uint64_t *ret_wrong);

	/* Optional (embedded; kvbench engine's readseq): a forward scan with the
	 * library's iterator from start (NULL: the first key) up to end
	 * exclusive (NULL: the last key); *ret_wrong counts records whose key is
	 * not key_size or whose value is not value_size bytes. */
	int (*scan_range)(struct yb_worker *w, const char *start, const char *end, size_t key_size,
	                  size_t value_size, uint64_t *ret_records, uint64_t *ret_wrong);
	/* Optional (embedded): what the library found when it opened the
	 * database (I/O method…), one line; "" when nothing. */
	void (*describe_io)(struct yb_db *db, char *buf, size_t len);

	/* Optional (kvd; kvbench versions): the newest m versions of key in
	 * one call, newest first, values included. Version i's value goes to
	 * buf + i * value_size (buf holds m values); *ret_count is how many
	 * came back, *ret_wrong how many were deletes or had another length. */
	int (*versions)(struct yb_worker *w, const char *key, size_t key_len, uint32_t m,
	                size_t value_size, void *buf, uint32_t *ret_count, uint32_t *ret_wrong);
	/* Optional (kvd, embedded; kvbench durable): the database's write-path
	 * counters. 0; 1 when this database keeps none (LSMs, LMDB); or -1
	 * with err filled. */
	int (*counters)(struct yb_db *db, struct yb_counters *ret, char *err, size_t errlen);
};

/* Every backend, in the default order. */
extern const struct yb_backend *const yb_backends[];
extern const size_t yb_backend_count;

/* The backend called name, or NULL. */
const struct yb_backend *yb_find(const char *name);

const char *yb_sync_name(enum yb_sync s);

#endif
