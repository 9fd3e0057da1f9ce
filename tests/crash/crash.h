/*
 * crash.h — the crash-loop harness's shared parts: the run's settings, the
 * deterministic content of keys and values, the model of every write the
 * clients attempted, and the checks run after each restart.
 *
 * Files:
 *   crashloop.c  options, the rounds (start, write, SIGKILL, restart, check),
 *                the report
 *   gen.c        PRNG, key names, value content derived from (key, nonce)
 *   model.c      the write log: acknowledged, maybe and rejected writes per
 *                key, maybe batches, violations
 *   writer.c     the client threads
 *   check.c      what is verified against the restarted kvd
 *   blobs.c      blob uploads beside the writers, and their check
 *
 * Threads: the writer threads record into the model during a round (each
 * key has its own mutex; batches and counters have theirs). The check runs
 * between rounds, when no writer runs, on the main thread and
 * --check-threads - 1 helpers, each key checked by exactly one of them.
 */
#ifndef KV_CRASH_H
#define KV_CRASH_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvclient.h"

#define CL_VALUE_MAX   65536u /* values are 0 … 64 KiB long */
#define CL_KEY_MAX     65536u /* kvd's largest key; one key has this size */
#define CL_BATCH_MAX   8u     /* operations per Batch */
#define CL_CLIENTS_MAX 64u
#define CL_KEYS_MAX    65536u
#define CL_REPORT_MAX  40u /* violations printed in full; the rest are counted */

/* ---- settings --------------------------------------------------------------- */

struct cl_opts {
	uint64_t iterations;   /* kills */
	uint64_t seed;
	uint32_t clients;      /* writer threads, one kvc handle each */
	uint32_t keys;         /* key space shared by all clients */
	uint32_t min_ms;       /* a round lasts min_ms … max_ms before the kill */
	uint32_t max_ms;
	uint32_t full_every;   /* every n-th check walks every version (0: only the last) */
	uint32_t damage_every; /* every n-th round damages a copy of the data (0: never) */
	uint32_t sample;       /* older versions read back per incremental check */
	uint32_t timeout_ms;   /* per call of the writers */
	uint32_t check_threads; /* threads (kvc handles) of a check */
	const char *segment_size; /* kvd's segment_size setting */
	const char *device;       /* --device: kvd serves this (formatted first); NULL: files */
	const char *device_image; /* --device-image: size of <dir>/dev.img, the device */
	const char *extent_size;  /* kvd --format --extent-size for the device */
	const char *kvd;       /* kvd binary ($KVD_BIN) */
	const char *dir;       /* scratch directory; NULL: a fresh one under $TMPDIR */
	bool keep;             /* keep the directory on any failure */
	bool verbose;
};

/* ---- deterministic content (gen.c) ------------------------------------------- */

uint64_t cl_mix(uint64_t z);                 /* splitmix64's finaliser */
uint64_t cl_rand(uint64_t *state);           /* splitmix64 step */
uint64_t cl_below(uint64_t *state, uint64_t n); /* 0 … n-1 */

/* The name of key number i (printable; its length varies with i). */
char *cl_key_name(uint64_t seed, uint32_t i, size_t *ret_len);
/* Values are 0 … 2^cl_value_max_log2 bytes (--value-max; default 16). */
extern uint32_t cl_value_max_log2;
/* The length of the value a write (key, nonce) writes. */
uint32_t cl_value_len(uint64_t seed, uint32_t key, uint64_t nonce);
/* Its bytes: buf must hold cl_value_len() bytes. */
void cl_value_fill(uint64_t seed, uint32_t key, uint64_t nonce, uint8_t *buf, uint32_t len);
/* Does data equal the value of (key, nonce)? *ret_diff: first differing
 * byte (or the shorter length) when not. scratch holds CL_VALUE_MAX bytes. */
bool cl_value_equal(uint64_t seed, uint32_t key, uint64_t nonce, const void *data, size_t len,
                    uint8_t *scratch, size_t *ret_diff);
/* A key for messages: up to 48 bytes, then "…(N bytes)". */
void cl_key_text(const char *name, size_t len, char *buf, size_t cap);

/* ---- the model (model.c) ----------------------------------------------------- */

enum cl_kind { CL_PUT = 1, CL_DEL = 2 };

enum cl_state {
	CL_ACKED = 1,    /* kvd answered OK */
	CL_APPLIED = 2,  /* a maybe write found applied after the restart */
	CL_MAYBE = 3,    /* no answer (timeout, connection lost, kvd died) */
	CL_REJECTED = 4, /* kvd answered that it did not apply it (condition, NOT_FOUND) */
};

enum cl_how { CL_HOW_PUT, CL_HOW_CPUT, CL_HOW_DEL, CL_HOW_CDEL, CL_HOW_BATCH, CL_HOW_N };

/* One write of one key. */
struct cl_write {
	uint64_t version; /* acked/applied: its version; maybe: 0 */
	uint64_t nonce;   /* the value is cl_value_fill(key, nonce); 0 for a delete */
	uint64_t done_us; /* when the call returned, µs since the run started */
	uint32_t round;   /* round (kill number) it was attempted in, from 1 */
	uint32_t batch;   /* maybe batches: index in the model's batch table + 1 */
	uint8_t kind;     /* enum cl_kind */
	uint8_t state;    /* enum cl_state */
	uint8_t how;      /* enum cl_how */
	uint8_t client;
	uint8_t checked;  /* content (or tombstone) read back at least once */
	uint8_t op;       /* index inside its batch */
};

struct cl_key {
	pthread_mutex_t mu;
	char *name;
	size_t len;
	struct cl_write *hist; /* acked and applied writes; sorted by version after a check */
	size_t nhist, chist;
	struct cl_write *pend; /* this round's maybe and rejected writes */
	size_t npend, cpend;
	uint64_t head;   /* newest version known, for the clients' conditions */
	bool exists;     /* the newest known version is a put */
	uint64_t floor;  /* the last check saw the whole chain up to this version */
};

/* A Batch that got no answer: all of its puts must show up, or none. */
struct cl_batch {
	uint32_t round;
	uint8_t client;
	uint8_t nops;
	uint32_t keys[CL_BATCH_MAX];
	uint8_t kinds[CL_BATCH_MAX];
	uint64_t found[CL_BATCH_MAX]; /* version the check found the op at; 0: not found */
};

struct cl_counts {
	atomic_uint_fast64_t acked[CL_HOW_N];  /* acknowledged writes (batch: ops) */
	atomic_uint_fast64_t maybe;            /* writes (batch ops) without an answer */
	atomic_uint_fast64_t maybe_applied;    /* … found applied after the restart */
	atomic_uint_fast64_t maybe_lost;       /* … found not applied */
	atomic_uint_fast64_t maybe_batches;
	atomic_uint_fast64_t maybe_batches_applied;
	atomic_uint_fast64_t rejected;         /* FAILED_PRECONDITION, NOT_FOUND */
	atomic_uint_fast64_t batch_noops;      /* batch deletes of a missing key */
	atomic_uint_fast64_t errors;           /* unexpected statuses (also violations) */
	atomic_uint_fast64_t bytes;            /* value bytes acknowledged */
	atomic_uint_fast64_t checked_acked;    /* acked writes found in their key's chain after
	                                          their round's kill */
	atomic_uint_fast64_t acked_near_kill;  /* … of them acked < 50 ms before the kill */
	atomic_uint_fast64_t checked_contents; /* versions read back by exact Get */
	atomic_uint_fast64_t sampled;          /* … of them older versions picked at random */
	atomic_uint_fast64_t checked_heads;
	atomic_uint_fast64_t full_checks;
	atomic_uint_fast64_t full_versions;    /* versions compared by full checks */
};

struct cl_model {
	const struct cl_opts *o;
	uint64_t seed;
	struct cl_key *keys;
	uint32_t nkeys;
	atomic_uint_fast64_t next_nonce;
	uint64_t t0_us;           /* the run's start (CLOCK_MONOTONIC) */
	uint32_t round;           /* current round, from 1 */
	uint64_t *kills;          /* [round]: when its SIGKILL was sent, µs */
	uint64_t version_floor;   /* last_version read after the last restart */
	uint64_t max_acked;       /* highest acked/applied version of all checks */

	pthread_mutex_t batch_mu;
	struct cl_batch *batches; /* this round's maybe batches */
	size_t nbatches, cbatches;

	pthread_mutex_t viol_mu;
	uint64_t violations;
	const char *dir;          /* printed with every violation */

	struct cl_counts n;
};

int cl_model_init(struct cl_model *m, const struct cl_opts *o);
void cl_model_fini(struct cl_model *m);
uint64_t cl_now_us(const struct cl_model *m);
uint64_t cl_nonce(struct cl_model *m);

/* A write's outcome, recorded by a writer thread. */
void cl_record(struct cl_model *m, uint32_t key, const struct cl_write *w);
/* A maybe batch: returns its index + 1 for the cl_write.batch of its ops. */
uint32_t cl_record_batch(struct cl_model *m, const struct cl_batch *b);
/* The condition a client puts on its next write of key: the newest version
 * the model knows and whether that is a put. */
void cl_key_head(struct cl_model *m, uint32_t key, uint64_t *ret_head, bool *ret_exists);

/* Prints one violation (with the seed, round and directory) and counts it. */
void cl_violation(struct cl_model *m, const char *key, size_t key_len, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* An error of the harness itself (not of kvd): printed, not counted. */
void cl_note(const struct cl_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the writers (writer.c) --------------------------------------------------- */

struct cl_round {
	struct cl_model *m;
	const char *url;
	atomic_bool stop;     /* set when the kill is about to be sent */
	uint32_t round;
};

/* Starts n writer threads for a round; cl_writers_join waits for them. */
int cl_writers_start(struct cl_round *r, uint32_t n, pthread_t *ret_threads);
void cl_writers_join(pthread_t *threads, uint32_t n);
/* Frees the writers' buffers at the end of the run. */
void cl_writers_free(void);

/* ---- blob uploads (blobs.c) ------------------------------------------------- */

/* Starts the round's uploader thread; cl_blobs_join waits for it. */
int cl_blobs_start(struct cl_round *r);
void cl_blobs_join(void);
/* After the restart: the blob keys against what was committed. */
void cl_blobs_check(struct cl_model *m, const char *url);
/* How many blob keys exist now (Stats counts them with the others). */
uint64_t cl_blobs_live(struct cl_model *m, const char *url);
void cl_blobs_report(void);
void cl_blobs_free(void);

/* ---- the check (check.c) ------------------------------------------------------ */

/* Verifies the model against the restarted kvd at url and resolves the
 * maybe writes. full: walk every version of every key. Returns 0 (the
 * violations are counted in m) or -1 when the check itself could not run
 * (kvd unreachable), which is also a violation. */
int cl_check(struct cl_model *m, const char *url, bool full);

#endif
