/*
 * kvclient.h — libkvclient, the C client of kvd (pkg-config: kvclient).
 *
 * A kvc handle holds one nng REQ socket connected to one kvd and a pool of
 * nng contexts, created once and reused, so many requests can be in flight
 * at once. Any number of threads may use one handle concurrently; each
 * blocking call uses one context for its round trip, and the *_async calls
 * let one thread keep many requests in flight.
 *
 * Errors. Every call returns 0 on success or a negative kvd status code
 * (-KVC_NOT_FOUND, -KVC_FAILED_PRECONDITION, …: the gRPC canonical codes of
 * rpc/PROTOCOL.md). Failures of the transport are -KVC_UNAVAILABLE (cannot
 * connect, connection lost) and -KVC_DEADLINE_EXCEEDED (no reply in time).
 * Pass a struct kvc_status in struct kvc_call to get the server's one-line
 * message. Outputs (ret_*) are untouched on failure.
 *
 * Writes are never applied twice: the REQ resend timer is disabled, and
 * every request carries this handle's random client id and a request id, so
 * a server that receives one twice answers the second from the first.
 */
#ifndef KVCLIENT_H
#define KVCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_PROTOCOL_VERSION 1

enum kvc_code {
	KVC_OK = 0,
	KVC_CANCELLED = 1,
	KVC_UNKNOWN = 2,
	KVC_INVALID_ARGUMENT = 3,
	KVC_DEADLINE_EXCEEDED = 4,
	KVC_NOT_FOUND = 5,
	KVC_ALREADY_EXISTS = 6,
	KVC_PERMISSION_DENIED = 7,
	KVC_RESOURCE_EXHAUSTED = 8,
	KVC_FAILED_PRECONDITION = 9,
	KVC_ABORTED = 10,
	KVC_OUT_OF_RANGE = 11,
	KVC_UNIMPLEMENTED = 12,
	KVC_INTERNAL = 13,
	KVC_UNAVAILABLE = 14,
	KVC_DATA_LOSS = 15,
	KVC_UNAUTHENTICATED = 16,
};

/* "NOT_FOUND" for KVC_NOT_FOUND or -KVC_NOT_FOUND; "UNKNOWN" otherwise. */
const char *kvc_code_name(int code);

#define KVC_MESSAGE_MAX 256

struct kvc_status {
	int code;                       /* 0 or a KVC_* code (positive) */
	char message[KVC_MESSAGE_MAX];  /* the server's or the library's one line */
};

#define KVC_DEFAULT_ENDPOINT "kv+ipc:///run/kvd/kv.sock"

struct kvc_options {
	const char *endpoint;    /* default KVC_DEFAULT_ENDPOINT */
	const char *tenant;      /* default tenant of calls; default "default" */
	const char *token;       /* sent with every request when set */
	uint32_t timeout_ms;     /* default per-call timeout; default 10000 */
	uint32_t contexts;       /* requests in flight at most; default 64 */
	size_t max_message_size; /* largest reply accepted; default 64 MiB */
	int32_t resend_ms;       /* REQ resend time; default -1 = never (tests only) */
	const char *tls_ca_file; /* for tls+tcp://: CA to verify the server with;
	                            default: the system's CA bundle */
	const char *tls_server_name; /* default: the endpoint's host */
};

void kvc_options_init(struct kvc_options *o);

typedef struct kvc kvc;

/* Connects (asynchronously: a server that is not up yet is retried by nng;
 * calls fail with -KVC_UNAVAILABLE until it is). -KVC_INVALID_ARGUMENT for a
 * bad endpoint. */
int kvc_open(const struct kvc_options *o, kvc **ret);
/* Waits for calls in flight to finish, then closes. NULL ok. */
void kvc_close(kvc *c);

/* Per-call options; NULL means the handle's defaults. */
struct kvc_call {
	const char *tenant;        /* NULL: the handle's tenant */
	uint32_t timeout_ms;       /* 0: the handle's timeout */
	struct kvc_status *status; /* filled when not NULL, also on success; the *_async
	                              calls fill it only when they fail to send, the
	                              outcome goes to the callback */
};

/* ---- data --------------------------------------------------------------- */

#define KVC_ANY_VERSION UINT64_MAX

/* ttl_ms that asks for no expiry even where the tenant has a default TTL
 * (ttl_ms 0 on the wire; 0 in the API means "the tenant's default"). */
#define KVC_TTL_NONE UINT64_MAX

struct kvc_write {
	uint64_t if_version; /* KVC_ANY_VERSION: unconditional; 0: must not exist */
	uint64_t ttl_ms;     /* 0: the tenant's default; KVC_TTL_NONE: none */
};
#define KVC_WRITE_INIT { KVC_ANY_VERSION, 0 }

struct kvc_value {
	void *data; /* malloc'd; kvc_value_free() */
	size_t len;
	uint64_t version;
	uint64_t timestamp_ms;
	uint64_t expiry_ms;
};
void kvc_value_free(struct kvc_value *v);

int kvc_put(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
            const void *value, size_t value_len, const struct kvc_write *w,
            uint64_t *ret_version);

/* version: exactly this version (0: newest); as_of: newest ≤ as_of (0: none). */
int kvc_get(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
            uint64_t version, uint64_t as_of, struct kvc_value *ret);

int kvc_delete(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
               uint64_t if_version, uint64_t *ret_version);

struct kvc_version {
	uint64_t version;
	uint64_t timestamp_ms;
	bool deleted;
	void *data; /* NULL when values were not asked for, or deleted */
	size_t len;
};
/* limit 0: the server's default (10). before 0: from the newest. */
int kvc_versions(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                 uint32_t limit, uint64_t before, bool values, struct kvc_version **ret_list,
                 size_t *ret_count, bool *ret_truncated);
void kvc_versions_free(struct kvc_version *list, size_t count);

enum kvc_op_type { KVC_OP_PUT = 1, KVC_OP_DELETE = 2 };

struct kvc_op {
	enum kvc_op_type type;
	const void *key;
	size_t key_len;
	const void *value;
	size_t value_len;
	uint64_t if_version; /* KVC_ANY_VERSION, 0, or a version */
	uint64_t ttl_ms;     /* as in struct kvc_write */
	uint64_t version; /* result */
};
/* All or nothing. On a failed condition returns -KVC_FAILED_PRECONDITION and
 * *ret_failed_op (if not NULL) is the index of the op that failed. */
int kvc_batch(kvc *c, const struct kvc_call *call, struct kvc_op *ops, size_t n,
              size_t *ret_failed_op);

/* ---- scans ---------------------------------------------------------------- */

struct kvc_scan_opts {
	const void *start; /* inclusive; NULL: first key */
	size_t start_len;
	const void *end; /* exclusive; NULL: past the last key */
	size_t end_len;
	const void *prefix;
	size_t prefix_len;
	uint64_t limit;     /* items in all; 0: no limit */
	uint32_t page_size; /* items per round trip; 0: 1000 */
	bool reverse;
	bool keys_only;
	uint64_t as_of; /* 0: a snapshot taken by the first page */
};

struct kvc_item {
	const void *key; /* valid until the next kvc_scan_next()/kvc_scan_close() */
	size_t key_len;
	const void *value; /* NULL with keys_only */
	size_t value_len;
	uint64_t version;
};

typedef struct kvc_iter kvc_iter;

/* Opens an iterator; pages are fetched on demand, all from one snapshot. */
int kvc_scan_open(kvc *c, const struct kvc_call *call, const struct kvc_scan_opts *o,
                  kvc_iter **ret);
/* 0 with *ret filled; 1 at the end; or a negative error. */
int kvc_scan_next(kvc_iter *it, struct kvc_item *ret);
/* The version the iterator reads at (known after the first page). */
uint64_t kvc_scan_revision(const kvc_iter *it);
void kvc_scan_close(kvc_iter *it);

/* ---- tenants and the daemon ----------------------------------------------- */

enum kvc_sync { KVC_SYNC_ALWAYS = 0, KVC_SYNC_INTERVAL = 1, KVC_SYNC_NONE = 2 };

struct kvc_tenant_opts {
	enum kvc_sync sync;
	uint32_t sync_interval_ms; /* 0: server default */
	uint32_t history;          /* 0: server default (1) */
	uint64_t ttl_ms;
	uint64_t max_keys;
};

struct kvc_tenant_info {
	char name[65];
	bool active;
	uint64_t idle_s;
	uint64_t keys;
	uint64_t live_bytes;
	uint64_t disk_bytes;
	uint64_t keydir_bytes;
	uint64_t activations;
	uint64_t last_activation_ms;
	uint64_t last_version;
	enum kvc_sync sync;
	uint32_t history;
	uint64_t ttl_ms;
	uint64_t max_keys;
	/* Stats only (TenantInfo leaves them 0) */
	uint64_t dead_bytes;
	uint64_t segments;
	uint64_t tombstones;
	uint64_t merges;
	uint64_t compact_revision;
	bool io_uring;             /* the tenant's log is written through io_uring */
	uint64_t batches;          /* group commits since activation */
	uint64_t batched_writes;   /* write requests they carried */
	uint64_t syncs;            /* fdatasyncs of the log since activation */
	uint64_t last_activation_us;
	bool read_only;            /* a write or fdatasync failed: writes refused until reopened */
};

struct kvc_tenant_entry {
	char name[65];
	bool active;
	bool refused; /* its TENANT file is damaged or missing: requests get UNAVAILABLE */
};

struct kvc_daemon_stats {
	char version[32];
	uint64_t uptime_s;
	uint64_t tenants;
	uint64_t active_tenants;
	uint64_t requests;
	uint64_t in_flight;
	uint64_t keydir_bytes;
	uint64_t workers;
};

struct kvc_health {
	char status[16]; /* "serving" or "stopping" */
	char version[32];
	uint64_t uptime_s;
};

struct kvc_compact_result {
	uint64_t compact_revision;
	uint64_t disk_bytes_before;
	uint64_t disk_bytes_after;
};

int kvc_tenant_create(kvc *c, const struct kvc_call *call, const char *name,
                      const struct kvc_tenant_opts *o);
int kvc_tenant_drop(kvc *c, const struct kvc_call *call, const char *name);
int kvc_tenant_list(kvc *c, const struct kvc_call *call, struct kvc_tenant_entry **ret_list,
                    size_t *ret_count);
void kvc_tenant_list_free(struct kvc_tenant_entry *list);
int kvc_tenant_info(kvc *c, const struct kvc_call *call, const char *name,
                    struct kvc_tenant_info *ret);
int kvc_tenant_passivate(kvc *c, const struct kvc_call *call, const char *name);
int kvc_tenant_activate(kvc *c, const struct kvc_call *call, const char *name,
                        uint64_t *ret_activation_us);
/* The call's tenant (or the handle's). */
int kvc_stats(kvc *c, const struct kvc_call *call, struct kvc_tenant_info *ret);
int kvc_stats_daemon(kvc *c, const struct kvc_call *call, struct kvc_daemon_stats *ret);
/* revision 0: merge only. */
int kvc_compact(kvc *c, const struct kvc_call *call, uint64_t revision,
                struct kvc_compact_result *ret);
int kvc_health(kvc *c, const struct kvc_call *call, struct kvc_health *ret);

/* ---- asynchronous calls ----------------------------------------------------
 *
 * The callback runs once, on a library thread, when the reply arrived or the
 * call failed; it must not block. The key and value passed in are copied
 * before the function returns. When all contexts are busy the call waits
 * for one (a bounded window of requests in flight).
 *
 * Returns 0 when the request was sent: fn then runs exactly once, and the
 * outcome is in res (call->status is not written later). A negative return
 * means nothing was sent and fn will not run; call->status says why. */

struct kvc_async_result {
	int rv;                  /* 0 or a negative code */
	const struct kvc_status *status;
	uint64_t version;        /* put, delete, get */
	const void *value;       /* get: valid during the callback only */
	size_t value_len;
	uint64_t timestamp_ms;
	uint64_t expiry_ms;
};

typedef void (*kvc_async_fn)(void *arg, const struct kvc_async_result *res);

int kvc_put_async(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  const void *value, size_t value_len, const struct kvc_write *w,
                  kvc_async_fn fn, void *arg);
int kvc_get_async(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  kvc_async_fn fn, void *arg);
int kvc_delete_async(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                     kvc_async_fn fn, void *arg);
/* Waits until no call of this handle is in flight. */
void kvc_drain(kvc *c);

/* ---- raw ------------------------------------------------------------------ */

/* Sends body as one request message and returns the reply body (malloc'd).
 * For tools and tests that speak the protocol themselves. */
int kvc_raw(kvc *c, uint32_t timeout_ms, const void *body, size_t len, void **ret_reply,
            size_t *ret_len);

#ifdef __cplusplus
}
#endif
#endif
