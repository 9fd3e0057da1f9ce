/*
 * etcd.h — a small synchronous client of etcd's v3 API through its JSON
 * gateway (HTTP POST to /v3/...; libcurl for HTTP, jansson for JSON), for
 * the ownership records of a shared device (docs/ETCD.md).
 *
 * Debian ships no C client of etcd's v3 (gRPC) API; the gateway serves the
 * same calls as JSON: keys and values travel base64-encoded, int64 fields as
 * strings, and fields holding their zero value are left out of answers (an
 * absent "lease" is lease 0, an absent "succeeded" is false).
 *
 * One `struct etcd` is one connection: a libcurl easy handle reused from call
 * to call, a list of endpoints tried in order when one cannot be reached, and
 * a timeout bounding each call. Every call blocks until it has an answer, an
 * error or its timeout.
 *
 * Error convention: every int-returning call gives 0 on success, a positive
 * ETCD_* outcome when the call worked but the answer is the other one of two
 * (ETCD_EXISTS, ETCD_NOT_MATCHED, ETCD_LEASE_GONE, ETCD_ABSENT), or a negative
 * errno:
 *   -ECONNREFUSED  no endpoint accepted a connection
 *   -EHOSTUNREACH  no endpoint's host could be resolved or reached
 *   -ETIMEDOUT     no answer within the timeout (or etcd's own deadline)
 *   -ECONNRESET    the connection broke while sending or receiving
 *   -EPROTO        the answer is not what etcd answers (not JSON, a field
 *                  missing or of the wrong type, bad base64, truncated)
 *   -EMSGSIZE      an answer larger than ETCD_RESPONSE_MAX, or a key or value
 *                  larger than ETCD_KEY_MAX / ETCD_VALUE_MAX
 *   -EINVAL        a bad argument, or etcd says the request is invalid
 *   -ENOENT        etcd does not know a lease the call names
 *   -EAGAIN        etcd is unavailable (no leader, shutting down)
 *   -ENOSPC        etcd's database is full (its quota)
 *   -EIO           any other failure etcd reports
 *   -ESTALE        a watch's start revision was compacted away
 *   -ENOMEM        out of memory
 * After any call, etcd_errmsg() gives one line saying what happened last
 * (empty after a success), for the caller's log; this module never logs.
 * Outputs go through ret_ parameters, last, and are untouched on failure.
 *
 * Threads: a `struct etcd` belongs to one thread at a time; different ones
 * may be used at once from different threads. The first etcd_open()
 * initialises libcurl for the process (thread-safely); etcd_global_cleanup(),
 * once at exit after every etcd_close(), gives libcurl's memory back.
 */
#ifndef KVD_ETCD_H
#define KVD_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define ETCD_ENDPOINTS_MAX 16                    /* endpoints in one list */
#define ETCD_KEY_MAX       4096u                 /* bytes of a key we send */
#define ETCD_VALUE_MAX     (1024u * 1024u)       /* bytes of a value we send */
#define ETCD_RESPONSE_MAX  (16u * 1024u * 1024u) /* bytes of an answer we read */
#define ETCD_ERRMSG_MAX    256                   /* etcd_errmsg()'s line, with its NUL */

/* The outcomes that are not errors (positive return values). */
enum {
	ETCD_EXISTS = 1,      /* put-if-absent: the key was there already */
	ETCD_NOT_MATCHED = 2, /* compare-and-delete: the key is absent or different */
	ETCD_LEASE_GONE = 3,  /* keepalive, revoke: the lease expired or was revoked */
	ETCD_ABSENT = 4,      /* get: no such key */
};

struct etcd;

/* One key as etcd holds it. key and value are NUL-terminated copies (the
 * NUL is not counted in the lengths; the bytes may hold NULs of their own). */
struct etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_rev; /* revision that created the key (since its last deletion) */
	int64_t mod_rev;    /* revision of its last put */
	int64_t version;    /* puts since it was created */
	int64_t lease;      /* lease it is attached to; 0 for none */
};

/* The keys of a prefix, in key order, and the store's revision they were
 * read at. */
struct etcd_kvs {
	struct etcd_kv *kv;
	size_t n;
	int64_t revision;
	int more; /* 1 when etcd held more keys than the limit asked for */
};

/* What a watch saw happen to a key. */
enum etcd_event_type {
	ETCD_EVENT_PUT = 1,    /* kv is the key as the put left it */
	ETCD_EVENT_DELETE = 2, /* kv has the key and mod_rev, the revision of the delete */
};

struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv;
};

/* The changes one answer of a watch gave, in revision order, and the
 * store's revision when it was sent. */
struct etcd_events {
	struct etcd_event *ev;
	size_t n;
	int64_t revision;
};

/* Opens a client of `endpoints`, a comma-separated list of URLs
 * ("http://127.0.0.1:2379,http://10.0.0.2:2379"), tried in that order for a
 * call until one accepts the connection; `timeout_ms` (> 0) bounds each call
 * as a whole. Nothing is connected yet. 0, -EINVAL (an empty list, more than
 * ETCD_ENDPOINTS_MAX, an URL that is not http:// or https://, timeout <= 0),
 * -ENOMEM, -EIO (libcurl could not be initialised). */
int etcd_open(const char *endpoints, int timeout_ms, struct etcd **ret_etcd);

/* Closes the connection and frees `e`; NULL is fine. */
void etcd_close(struct etcd *e);

/* Gives libcurl's process-wide memory back; after every etcd_close(), when
 * no other thread uses libcurl. */
void etcd_global_cleanup(void);

/* The line that says what the last call on `e` did wrong ("" after a
 * success); valid until the next call on `e`. */
const char *etcd_errmsg(const struct etcd *e);

/* Grants a lease of `ttl_s` seconds (> 0): its id and the TTL etcd granted
 * (etcd may raise a TTL below its minimum). 0, or an error above. */
int etcd_lease_grant(struct etcd *e, int64_t ttl_s, int64_t *ret_id, int64_t *ret_ttl);

/* Renews lease `id` once: 0 and the seconds it has again, or ETCD_LEASE_GONE
 * (it expired or was revoked: whatever was attached to it is gone), or an
 * error above. */
int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ret_ttl);

/* Revokes lease `id`, deleting the keys attached to it: 0, ETCD_LEASE_GONE
 * (there was no such lease), or an error above. */
int etcd_lease_revoke(struct etcd *e, int64_t id);

/* Creates `key` with `value`, attached to `lease` (0 for none), only if the
 * key does not exist (one transaction: compare create_revision == 0, put;
 * else range):
 *   0            taken; *ret_rev is the revision of the put, which is the
 *                key's create_revision (monotonic across the cluster);
 *                *ret_cur is untouched.
 *   ETCD_EXISTS  the key exists; *ret_cur is what it holds (free it with
 *                etcd_kv_clear()), *ret_rev is untouched.
 * or an error above; -ENOENT when `lease` does not exist (expired, revoked). */
int etcd_put_if_absent(struct etcd *e, const void *key, size_t key_len, const void *value,
                       size_t value_len, int64_t lease, int64_t *ret_rev, struct etcd_kv *ret_cur);

/* Deletes `key` only if its value is `value` (one transaction): 0 deleted,
 * ETCD_NOT_MATCHED (absent or another value), or an error above. */
int etcd_delete_if_value(struct etcd *e, const void *key, size_t key_len, const void *value,
                         size_t value_len);

/* Deletes `key` only if its mod_revision is `mod_rev` (> 0): 0 deleted,
 * ETCD_NOT_MATCHED (absent or changed since), or an error above. */
int etcd_delete_if_mod(struct etcd *e, const void *key, size_t key_len, int64_t mod_rev);

/* Reads `key`: 0 and its record in *ret_kv (free it with etcd_kv_clear())
 * and the store's revision in *ret_rev (may be NULL), ETCD_ABSENT (the
 * revision is still given), or an error above. */
int etcd_get(struct etcd *e, const void *key, size_t key_len, struct etcd_kv *ret_kv,
             int64_t *ret_rev);

/* Reads every key that starts with `prefix` (plen > 0) whose mod_revision is
 * at least `min_mod_rev` (0 for all; polling with last revision seen + 1
 * gives what changed since, deletions aside), at most `limit` of them (0 for
 * no limit; ret->more says whether some were left out): 0 and the keys in
 * *ret (free it with etcd_kvs_free()), or an error above. */
int etcd_list(struct etcd *e, const void *prefix, size_t plen, int64_t min_mod_rev, int64_t limit,
              struct etcd_kvs *ret);

/* Waits at most `wait_ms` (> 0; instead of the client's timeout) for the
 * changes (puts and deletes) of keys that start with `prefix` at revisions
 * `start_rev` (> 0) and later, through a watch (/v3/watch): 0 and in *ret
 * (free it with etcd_events_free()) the changes of the first answer that has
 * any (changes older than the watch come at once), or 0 and no change when
 * wait_ms passed first; -ESTALE when start_rev is older than etcd's
 * compaction (list the prefix again), or an error above (-ETIMEDOUT: not
 * even the watch was set up in time). The next call's start_rev is the last
 * change's kv.mod_rev + 1, or ret->revision + 1 when there was none. */
int etcd_watch_prefix(struct etcd *e, const void *prefix, size_t plen, int64_t start_rev,
                      int wait_ms, struct etcd_events *ret);

/* Frees the changes of a watch and zeroes them; NULL is fine. */
void etcd_events_free(struct etcd_events *evs);

/* The end of the range of keys that start with `prefix` (the prefix with its
 * last byte below 0xff incremented and what follows it dropped; a prefix of
 * only 0xff bytes has no end: "\0", etcd's "to the last key"). Writes at most
 * plen bytes (1 for "\0") to out and returns how many. */
size_t etcd_prefix_end(const void *prefix, size_t plen, unsigned char *out);

/* Frees what a record holds and zeroes it; NULL is fine. */
void etcd_kv_clear(struct etcd_kv *kv);

/* Frees the records of a list and zeroes it; NULL is fine. */
void etcd_kvs_free(struct etcd_kvs *kvs);

#endif /* KVD_ETCD_H */
