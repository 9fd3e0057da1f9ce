/*
 * kvclient.h — libkvclient, the C client of kvd (pkg-config: kvclient).
 *
 * A kvc handle talks to one kvd over one of two transports, chosen by the
 * endpoint's scheme in kvc_open (rpc/PROTOCOL.md, "Transport and framing"):
 *
 *   kv+ipc://PATH, kv+tcp://HOST:PORT, kv+tls://HOST:PORT   kvd's own
 *       stream framing (the default, KVC_DEFAULT_ENDPOINT); kv+tls:// runs
 *       it over TLS (OpenSSL). Each blocking call takes a
 *       connection of its own from a pool that grows to `contexts`; the
 *       *_async calls share one pipelined connection whose replies a
 *       library thread reads.
 *   ipc://PATH, tcp://HOST:PORT, tls+tcp://HOST:PORT   an nng REQ socket
 *       with a pool of `contexts` nng contexts, created once and reused.
 *
 * Either way at most `contexts` requests are in flight at once. Any number of
 * threads may use one handle concurrently; the *_async calls let one
 * thread keep many requests in flight, and their callbacks run on a library
 * thread.
 *
 * Errors. Every int-returning call returns 0 on success or a negative kvd
 * status code (-KVC_NOT_FOUND, -KVC_FAILED_PRECONDITION, …: the gRPC
 * canonical codes of rpc/PROTOCOL.md); the comment above each call lists
 * the codes it gives. Besides those, every call that talks to kvd can
 * return:
 *   -KVC_INVALID_ARGUMENT     a bad argument, found before sending (the
 *                             status message says which), or a request
 *                             larger than max_message_size
 *   -KVC_UNAVAILABLE          cannot connect, connection lost, or the
 *                             server is shutting down
 *   -KVC_DEADLINE_EXCEEDED    no reply within the call's timeout
 *   -KVC_RESOURCE_EXHAUSTED   out of memory on either side, a reply larger
 *                             than max_message_size, or the server's queue
 *                             for the tenant is full
 *   -KVC_CANCELLED            the handle is being closed
 *   -KVC_UNAUTHENTICATED      the server wants a token and this one is
 *                             missing or wrong (never Health)
 *   -KVC_PERMISSION_DENIED    the token lacks the role the call needs on
 *                             its tenant (or daemon admin)
 *   -KVC_UNIMPLEMENTED        the server does not know the method
 *   -KVC_INTERNAL             a malformed reply, or a bug in the server
 *   -KVC_UNKNOWN              a status this library does not know
 *   -KVC_MOVED                cluster mode: the tenant is served by another
 *                             node and the call could not follow it there
 *                             (KVC_REDIRECTS_MAX hops; async calls)
 * and the calls on a tenant (the data calls, kvc_compact, kvc_stats) also
 * -KVC_NOT_FOUND when the tenant does not exist. Pass a struct kvc_status
 * in struct kvc_call to get the server's one-line message. Outputs (ret_*)
 * are untouched on failure.
 *
 * Writes are never applied twice: requests are never resent (the nng REQ
 * resend timer is disabled), and every request carries this handle's random
 * client id and a request id, so a server that receives one twice answers
 * the second from the first.
 *
 * TLS (tls+tcp://, kv+tls://): the server's certificate is always verified,
 * against tls_ca_file (default: the system's CA bundle), and its name
 * against tls_server_name (default: the endpoint's host; an IP address is
 * matched against the certificate's IP addresses). A handshake that fails
 * (an untrusted or expired certificate, a wrong name, a server that wants
 * a client certificate and got none or one it does not trust) fails the
 * call with -KVC_UNAVAILABLE and says why in its status message. A client
 * certificate for mutual TLS is given with kvc_open_tls.
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
	/* kvd's own: the tenant is served by another node of the cluster
	 * (docs/CLUSTER.md). Calls follow it by themselves (up to
	 * KVC_REDIRECTS_MAX hops), async calls too (their callback runs once,
	 * with the answer of the node that served them; kvc_drain waits for
	 * them); a call gives it only when it could not (too many hops, a
	 * node that cannot be reached). Since libkvclient 0.4. */
	KVC_MOVED = 17,
};

/* Redirects (KVC_MOVED) one call follows at most. */
#define KVC_REDIRECTS_MAX 3

/* "NOT_FOUND" for KVC_NOT_FOUND or -KVC_NOT_FOUND; "UNKNOWN" otherwise. */
const char *kvc_code_name(int code);

#define KVC_MESSAGE_MAX 256

struct kvc_status {
	int code;                       /* 0 or a KVC_* code (positive) */
	char message[KVC_MESSAGE_MAX];  /* the server's or the library's one line */
};

#define KVC_DEFAULT_ENDPOINT "kv+ipc:///run/kvd/kv.sock"

struct kvc_options {
	const char *endpoint;    /* default KVC_DEFAULT_ENDPOINT; or several,
	                            comma-separated (the nodes of a cluster, at
	                            most 16): calls go to the first, and to the
	                            next ones in order while those before cannot
	                            be connected to (nothing was sent) */
	const char *tenant;      /* default tenant of calls; default "default" */
	const char *token;       /* sent with every request when set */
	uint32_t timeout_ms;     /* default per-call timeout; default 10000 */
	uint32_t contexts;       /* requests in flight at most; default 64 */
	size_t max_message_size; /* largest reply accepted; default 64 MiB */
	int32_t resend_ms;       /* REQ resend time; default -1 = never (tests only) */
	const char *tls_ca_file; /* for tls+tcp:// and kv+tls://: CA to verify the
	                            server with; default: the system's CA bundle */
	const char *tls_server_name; /* default: the endpoint's host */
};

void kvc_options_init(struct kvc_options *o);

typedef struct kvc kvc;

/* Opens a handle for o->endpoint (NULL o: all defaults). Nothing is sent:
 * the stream transport connects on the first call; the nng transport dials
 * in the background and retries a server that is not up yet. Until one is
 * reachable, calls fail with -KVC_UNAVAILABLE.
 * contexts above 4096 are taken as 4096.
 * Errors: -KVC_INVALID_ARGUMENT (NULL ret, a bad or unsupported endpoint,
 * TLS settings nng refuses), -KVC_RESOURCE_EXHAUSTED (out of memory,
 * threads or sockets), -KVC_INTERNAL (nng refused a socket option). */
int kvc_open(const struct kvc_options *o, kvc **ret);
/* Waits for calls in flight to finish, then closes. NULL ok. */
void kvc_close(kvc *c);

/* kvc_open, with a client certificate for mutual TLS on kv+tls://: cert_file
 * (PEM: the certificate, then any intermediate CAs) and key_file (its PEM
 * private key, unencrypted) are presented to a server that asks for a
 * certificate (kvd's tls_client_auth); kvd may map the certificate to roles,
 * so that requests need no token. Both NULL: as kvc_open. Other schemes
 * ignore them. Since libkvclient 0.3 (KVCLIENT_0.3).
 * Errors: those of kvc_open; -KVC_INVALID_ARGUMENT also when only one of
 * the two is given, or either file cannot be read or they do not match
 * (on kv+tls://). */
int kvc_open_tls(const struct kvc_options *o, const char *cert_file, const char *key_file,
                 kvc **ret);

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

/* Writes value under key; *ret_version (if not NULL) is its new version.
 * Errors: those of every call; -KVC_INVALID_ARGUMENT (key empty or too long,
 * value too large), -KVC_FAILED_PRECONDITION (w->if_version did not hold),
 * -KVC_RESOURCE_EXHAUSTED (the tenant's max_keys, disk full),
 * -KVC_UNAVAILABLE (the tenant is read-only after an I/O error). */
int kvc_put(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
            const void *value, size_t value_len, const struct kvc_write *w,
            uint64_t *ret_version);

/* version: exactly this version (0: newest); as_of: newest ≤ as_of (0: none).
 * *ret is malloc'd: kvc_value_free().
 * Errors: those of every call; -KVC_NOT_FOUND (no such key, deleted,
 * expired, or that version is a delete or another key's),
 * -KVC_OUT_OF_RANGE (as_of older than the compacted history),
 * -KVC_UNAVAILABLE (I/O error), -KVC_DATA_LOSS (the stored value is
 * damaged). */
int kvc_get(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
            uint64_t version, uint64_t as_of, struct kvc_value *ret);

/* Deletes key (if_version as in struct kvc_write); *ret_version (if not
 * NULL) is the version of the delete.
 * Errors: those of every call; -KVC_NOT_FOUND (no such key: nothing is
 * written), -KVC_FAILED_PRECONDITION, -KVC_RESOURCE_EXHAUSTED (disk full),
 * -KVC_UNAVAILABLE (as kvc_put). */
int kvc_delete(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
               uint64_t if_version, uint64_t *ret_version);

struct kvc_version {
	uint64_t version;
	uint64_t timestamp_ms;
	bool deleted;
	void *data; /* NULL when values were not asked for, or deleted */
	size_t len;
};
/* key's versions, newest first. limit 0: the server's default (10); before
 * 0: from the newest. *ret_list is malloc'd: kvc_versions_free(); a
 * truncated list is not an error (*ret_truncated).
 * Errors: those of every call; -KVC_UNAVAILABLE (I/O error),
 * -KVC_DATA_LOSS. */
int kvc_versions(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                 uint32_t limit, uint64_t before, bool values, struct kvc_version **ret_list,
                 size_t *ret_count, bool *ret_truncated);
void kvc_versions_free(struct kvc_version *list, size_t count);
/* kvc_versions, saying which versions are blobs (see "blobs" below; their
 * data is NULL): *ret_blob_sizes (may be NULL) is a malloc'd array of
 * *ret_count entries (free() it), each the version's blob size, or
 * KVC_NOT_BLOB. Errors: kvc_versions'. (KVCLIENT_0.6) */
#define KVC_NOT_BLOB UINT64_MAX
int kvc_versions_ex(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                    uint32_t limit, uint64_t before, bool values, struct kvc_version **ret_list,
                    size_t *ret_count, bool *ret_truncated, uint64_t **ret_blob_sizes);

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
/* All or nothing; on success each op's version is set. On a failed
 * condition returns -KVC_FAILED_PRECONDITION and *ret_failed_op (if not
 * NULL) is the index of the op that failed; the same with
 * -KVC_RESOURCE_EXHAUSTED when that op would pass the tenant's max_keys.
 * Errors: those of every call; -KVC_INVALID_ARGUMENT (n 0 or over 10 000,
 * an op as kvc_put or kvc_delete refuses), -KVC_FAILED_PRECONDITION,
 * -KVC_RESOURCE_EXHAUSTED (max_keys, disk full), -KVC_UNAVAILABLE (as
 * kvc_put). */
int kvc_batch(kvc *c, const struct kvc_call *call, struct kvc_op *ops, size_t n,
              size_t *ret_failed_op);

/* kvc_get that also takes a key whose value is a blob (see "blobs" below):
 * then it returns 0 with *ret_blob true, *ret_blob_size the blob's size,
 * ret->data NULL and ret->len 0 (and the version, timestamp and expiry
 * filled); for any other value *ret_blob is false. ret_blob and
 * ret_blob_size may be NULL. kvc_get itself answers a blob with
 * -KVC_FAILED_PRECONDITION ("… is a blob of N bytes …"), never with an
 * empty value. Errors: kvc_get's. (KVCLIENT_0.6) */
int kvc_get_ex(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
               uint64_t version, uint64_t as_of, struct kvc_value *ret, bool *ret_blob,
               uint64_t *ret_blob_size);

/* ---- blobs -------------------------------------------------------------------
 *
 * A blob is a value too large for one message, written in pieces by a
 * streaming writer and read back by byte ranges (rpc/PROTOCOL.md, "Blobs").
 * Until it is committed nothing of it is visible; the commit makes it the
 * key's newest version, as a put would (conditions, TTL, history, delete
 * alike). kvc_get on a blob key gives -KVC_FAILED_PRECONDITION (kvc_get_ex
 * says it is a blob, and its size); kvc_versions and scans give a blob's
 * versions and items with no value bytes (data/value NULL). Since
 * libkvclient 0.6 (KVCLIENT_0.6).
 */
#define KVC_BLOB_APPEND_SIZE (1u << 20) /* bytes per BlobAppend by default */
#define KVC_BLOB_READ_MAX    (4u << 20) /* bytes one BlobRead gives at most */

struct kvc_blob_opts {
	uint32_t chunk_size;  /* the server's chunk size, 4 KiB..4 MiB; 0: its default (64 KiB) */
	uint32_t append_size; /* bytes the writer sends per BlobAppend (its buffer); 0:
	                         KVC_BLOB_APPEND_SIZE; at most what max_message_size allows */
	uint64_t if_version;  /* at the commit, as struct kvc_write's */
	uint64_t ttl_ms;      /* as struct kvc_write's */
};
#define KVC_BLOB_OPTS_INIT { 0, 0, KVC_ANY_VERSION, 0 }

typedef struct kvc_blob_writer kvc_blob_writer;

/* Begins an upload of a blob for key (BlobBegin); o NULL: KVC_BLOB_OPTS_INIT.
 * The writer keeps call's tenant, timeout and status pointer for its later
 * calls (call->status, when set, must outlive the writer). A writer is used
 * by one thread at a time. *ret: kvc_blob_writer_close() it.
 * Errors: those of every call; -KVC_INVALID_ARGUMENT (the key; a chunk_size
 * out of range). */
int kvc_blob_writer_open(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                         const struct kvc_blob_opts *o, kvc_blob_writer **ret);
/* Takes len more bytes: buffered, and sent in BlobAppends of append_size
 * bytes as they fill. A call that fails leaves the writer failed: later
 * calls give the same error. Errors: those of every call (an append that
 * went unanswered is sent again, at most twice: the server takes its bytes
 * once); -KVC_NOT_FOUND (the upload was aborted: idle for the server's
 * upload_idle_ms, its tenant passivated or dropped), -KVC_INVALID_ARGUMENT
 * (past 1 TiB), -KVC_FAILED_PRECONDITION (committed already),
 * -KVC_RESOURCE_EXHAUSTED, -KVC_UNAVAILABLE (disk full, I/O error). */
int kvc_blob_write(kvc_blob_writer *w, const void *buf, size_t len);
/* Bytes written to the writer so far. */
uint64_t kvc_blob_writer_size(const kvc_blob_writer *w);
/* Sends what is buffered and commits (BlobCommit): the blob becomes the
 * key's newest version, *ret_version (may be NULL). Errors: those of
 * kvc_blob_write; -KVC_FAILED_PRECONDITION (if_version did not hold),
 * -KVC_RESOURCE_EXHAUSTED (the tenant's max_keys). */
int kvc_blob_commit(kvc_blob_writer *w, uint64_t *ret_version);
/* Frees the writer; one not committed is aborted (BlobAbort, best effort):
 * nothing of it is visible. NULL ok. */
void kvc_blob_writer_close(kvc_blob_writer *w);

struct kvc_blob_info {
	uint64_t size;         /* bytes */
	uint32_t chunk_size;   /* as stored: every chunk but the last holds this many */
	uint32_t chunks;
	uint64_t xxh64;        /* XXH64 (seed 0) of the whole blob */
	uint64_t stored_bytes; /* its chunks as stored (after compression) */
	uint64_t version;
	uint64_t timestamp_ms;
	uint64_t expiry_ms; /* 0: none */
};

/* A blob's size, checksum and version: version 0 the newest, else exactly
 * that one. Errors: those of every call; -KVC_NOT_FOUND (as kvc_get),
 * -KVC_FAILED_PRECONDITION (the value is not a blob), -KVC_UNAVAILABLE,
 * -KVC_DATA_LOSS. */
int kvc_blob_info(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  uint64_t version, struct kvc_blob_info *ret);
/* Reads up to len bytes of the blob from offset into buf, in BlobReads of
 * at most KVC_BLOB_READ_MAX bytes, all of one version (version 0: the
 * newest when the first BlobRead ran; an overwrite meanwhile does not mix
 * in). *ret_n (may be NULL) is less than len only at the blob's end, 0 at
 * or past it. Errors: kvc_blob_info's; -KVC_NOT_FOUND also when the
 * version read first is gone meanwhile (compacted, expired). */
int kvc_blob_read(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  uint64_t version, uint64_t offset, void *buf, size_t len, size_t *ret_n);

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

/* Opens an iterator; pages are fetched on demand, all from one snapshot,
 * the first one here. Close it with kvc_scan_close().
 * Errors: those of every call; -KVC_INVALID_ARGUMENT (a bound longer than
 * a key), -KVC_OUT_OF_RANGE (as_of older than the compacted history),
 * -KVC_UNAVAILABLE (I/O error), -KVC_DATA_LOSS. */
int kvc_scan_open(kvc *c, const struct kvc_call *call, const struct kvc_scan_opts *o,
                  kvc_iter **ret);
/* 0 with *ret filled; 1 at the end; or a negative error: those of
 * kvc_scan_open, for the page it fetched. */
int kvc_scan_next(kvc_iter *it, struct kvc_item *ret);
/* Whether the item kvc_scan_next gave last is a blob (its value NULL),
 * with its size in *ret_size (may be NULL); false for any other item, and
 * before the first. Not for keys_only scans (false there). (KVCLIENT_0.6) */
bool kvc_scan_blob(const kvc_iter *it, uint64_t *ret_size);
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

/* How a tenant stores values (kvc_tenant_codec, kvc_stats_codec). A struct
 * of its own, so struct kvc_tenant_info keeps its layout. */
struct kvc_codec_info {
	char compression[17]; /* "none", "lz4", "zstd" or "zstd:LEVEL"; "" from a server
	                         without compression */
	/* kvc_stats_codec only (kvc_tenant_codec leaves them 0), since the
	 * tenant was activated: value bytes of puts as given, the same values
	 * as stored (after compression), how many were stored compressed */
	uint64_t value_logical_bytes;
	uint64_t value_stored_bytes;
	uint64_t values_compressed;
};

/* A tenant's byte limit and what a write past its limits does
 * (kvc_tenant_create_evict). A struct of its own, so struct
 * kvc_tenant_opts keeps its layout. */
struct kvc_evict_opts {
	uint64_t max_bytes; /* bytes its live keys may take (their newest records); 0: none */
	const char *evict;  /* "refuse" or "oldest"; NULL: the server's default */
};

/* A tenant's byte limit, eviction and evictions (kvc_tenant_evict,
 * kvc_stats_evict). */
struct kvc_evict_info {
	uint64_t max_bytes;  /* 0: no limit */
	char evict[8];       /* "refuse" or "oldest"; "" from a server without eviction */
	/* kvc_stats_evict only (kvc_tenant_evict leaves them 0): keys evicted
	 * since the tenant was activated; of its live_bytes, the bytes of
	 * tombstones (live_bytes - tombstone_bytes is what max_bytes bounds) */
	uint64_t evictions;
	uint64_t tombstone_bytes;
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

/* ---- the daemon's detailed figures (kvc_stats_daemon_detail) ----------------
 *
 * The figures of kvd's metrics endpoint (docs/METRICS.md), per method and
 * per listener. The library allocates struct kvc_daemon_detail and its
 * arrays in one block (kvc_daemon_detail_free); callers never allocate or
 * copy one, so a later version may append members to it without a new
 * soname. kvc_method_stats and kvc_connection_stats keep their layout
 * (callers index arrays of them): a new per-method figure would come as a
 * new array. */
#define KVC_STATUS_SLOTS 32         /* by_status[] entries: status codes 0..31 */
#define KVC_LATENCY_OVER UINT64_MAX /* a percentile past the last bucket (10 s) */

struct kvc_method_stats {
	char method[32];   /* "Get", "Put", …; "invalid": requests that did not decode */
	uint64_t requests; /* answered */
	uint64_t errors;   /* answered with a status other than OK */
	uint64_t by_status[KVC_STATUS_SLOTS]; /* answered, by KVC_* code */
	uint64_t latency_count;  /* requests timed (= requests, bar one being counted) */
	uint64_t latency_sum_ns; /* their time from arrival to reply, summed */
	/* Percentiles of that time: upper bounds of the histogram bucket
	 * (50 us, 100 us, 250 us, … 10 s) that holds them; KVC_LATENCY_OVER
	 * past 10 s; 0 when nothing was timed. */
	uint64_t p50_ns, p90_ns, p99_ns;
};

struct kvc_connection_stats {
	char transport[16]; /* "stream" (kv+ipc://, kv+tcp://) or "nng" */
	char listen[256];   /* the listener's address as configured ("": all nng listeners) */
	uint64_t open;      /* connections open now */
};

struct kvc_daemon_detail {
	struct kvc_daemon_stats daemon; /* what kvc_stats_daemon gives */
	/* true: kvd counts requests (its metrics endpoint is on, metrics_listen);
	 * false: the request, latency and byte figures are 0 */
	bool counting;
	uint64_t received_bytes; /* request messages, without transport framing */
	uint64_t sent_bytes;     /* reply messages */
	size_t nmethods;         /* methods with at least one request */
	struct kvc_method_stats *methods;
	size_t nconnections; /* one per listener */
	struct kvc_connection_stats *connections;
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

/* Tenant administration. Errors, besides those of every call:
 *  create: -KVC_INVALID_ARGUMENT (not a valid tenant name, a setting out of
 *          range), -KVC_ALREADY_EXISTS, -KVC_RESOURCE_EXHAUSTED and
 *          -KVC_UNAVAILABLE (its files could not be created);
 *  drop, passivate: -KVC_NOT_FOUND, -KVC_INVALID_ARGUMENT (a bad name;
 *          "default" cannot be dropped), -KVC_UNAVAILABLE ("busy, try
 *          again": still in use);
 *  activate: -KVC_NOT_FOUND, -KVC_INVALID_ARGUMENT, -KVC_UNAVAILABLE (I/O
 *          error), -KVC_RESOURCE_EXHAUSTED (memory or file descriptors);
 *  info: -KVC_NOT_FOUND, -KVC_INVALID_ARGUMENT; list: none of its own.
 * The lists are malloc'd: kvc_tenant_list_free(). */
int kvc_tenant_create(kvc *c, const struct kvc_call *call, const char *name,
                      const struct kvc_tenant_opts *o);
/* kvc_tenant_create, with how the tenant stores values: compression
 * "none", "lz4", "zstd" or "zstd:LEVEL" (1..22), each value compressed only
 * when that makes it shorter; NULL: the server's [tenant-defaults], as
 * kvc_tenant_create. Errors: kvc_tenant_create's (-KVC_INVALID_ARGUMENT
 * also for a codec the server does not take). (KVCLIENT_0.5) */
int kvc_tenant_create_codec(kvc *c, const struct kvc_call *call, const char *name,
                            const struct kvc_tenant_opts *o, const char *compression);
/* The tenant's compression, from TenantInfo (the counters 0). Errors:
 * kvc_tenant_info's. (KVCLIENT_0.5) */
int kvc_tenant_codec(kvc *c, const struct kvc_call *call, const char *name,
                     struct kvc_codec_info *ret);
/* kvc_tenant_create_codec, with the tenant's byte limit and eviction:
 * e->max_bytes (0: none) is sent, and e->evict when not NULL — "refuse"
 * (a write past max_keys or max_bytes fails with -KVC_RESOURCE_EXHAUSTED)
 * or "oldest" (it first evicts the least recently written keys, in the
 * same atomic write; -KVC_RESOURCE_EXHAUSTED only when it cannot fit even
 * so). e NULL: both the server's [tenant-defaults], as
 * kvc_tenant_create_codec. Errors: kvc_tenant_create's
 * (-KVC_INVALID_ARGUMENT also for an evict the server does not take).
 * (KVCLIENT_0.6) */
int kvc_tenant_create_evict(kvc *c, const struct kvc_call *call, const char *name,
                            const struct kvc_tenant_opts *o, const char *compression,
                            const struct kvc_evict_opts *e);
/* The tenant's max_bytes and evict, from TenantInfo (evictions 0).
 * Errors: kvc_tenant_info's. (KVCLIENT_0.6) */
int kvc_tenant_evict(kvc *c, const struct kvc_call *call, const char *name,
                     struct kvc_evict_info *ret);
int kvc_tenant_drop(kvc *c, const struct kvc_call *call, const char *name);
int kvc_tenant_list(kvc *c, const struct kvc_call *call, struct kvc_tenant_entry **ret_list,
                    size_t *ret_count);
void kvc_tenant_list_free(struct kvc_tenant_entry *list);
int kvc_tenant_info(kvc *c, const struct kvc_call *call, const char *name,
                    struct kvc_tenant_info *ret);
int kvc_tenant_passivate(kvc *c, const struct kvc_call *call, const char *name);
int kvc_tenant_activate(kvc *c, const struct kvc_call *call, const char *name,
                        uint64_t *ret_activation_us);
/* Cluster mode (docs/CLUSTER.md): a tenant's owner node. */
struct kvc_owner {
	char node[65];      /* its node id */
	char address[256];  /* its client endpoint (kv+tcp://HOST:PORT) */
	uint64_t epoch;     /* the etcd revision that made it the owner */
};

/* Cluster mode. release: the node that owns `name` (a MOVED is followed to
 * it) passivates the tenant and gives its ownership up. adopt: the
 * handle's node (never another: no route is followed) takes the tenant and
 * serves it; *ret (if not NULL) is then this node, its address and its new
 * epoch. Since libkvclient 0.4 (KVCLIENT_0.4).
 * Errors, besides those of every call: -KVC_INVALID_ARGUMENT (a bad
 * name), -KVC_FAILED_PRECONDITION (release: the tenant has no owner;
 * adopt: another node owns it while its lease lives, the status message
 * names it; either: kvd runs without a cluster), -KVC_UNAVAILABLE (busy,
 * the node is fenced, or etcd cannot be asked), -KVC_MOVED (release: too
 * many redirects). */
int kvc_tenant_release(kvc *c, const struct kvc_call *call, const char *name);
/* kvc_tenant_list with each tenant's owner node in cluster mode (node ""
 * and epoch 0: no owner, or kvd is a single node). The list is malloc'd:
 * kvc_tenant_owners_free(). Since libkvclient 0.4.
 * Errors: those of kvc_tenant_list; -KVC_UNAVAILABLE also when the node
 * cannot read the owners from etcd. */
struct kvc_tenant_owner {
	char name[65];
	bool active;
	bool refused;
	char node[65];  /* the owner's node id; "": none */
	uint64_t epoch; /* its epoch; 0: none */
};
int kvc_tenant_owners(kvc *c, const struct kvc_call *call, struct kvc_tenant_owner **ret_list,
                      size_t *ret_count);
void kvc_tenant_owners_free(struct kvc_tenant_owner *list);
int kvc_tenant_adopt(kvc *c, const struct kvc_call *call, const char *name,
                     struct kvc_owner *ret);

/* The call's tenant (or the handle's); the daemon's. None has errors of
 * its own besides -KVC_NOT_FOUND for the tenant. */
int kvc_stats(kvc *c, const struct kvc_call *call, struct kvc_tenant_info *ret);
/* Stats of the call's tenant: its compression and value byte counters.
 * Errors: kvc_stats'. (KVCLIENT_0.5) */
int kvc_stats_codec(kvc *c, const struct kvc_call *call, struct kvc_codec_info *ret);
/* Stats of the call's tenant: its max_bytes, evict and evictions since
 * activation. Errors: kvc_stats'. (KVCLIENT_0.6) */
int kvc_stats_evict(kvc *c, const struct kvc_call *call, struct kvc_evict_info *ret);
int kvc_stats_daemon(kvc *c, const struct kvc_call *call, struct kvc_daemon_stats *ret);
/* The daemon's figures with those of its metrics endpoint: requests by
 * method and status, latency percentiles, bytes, connections per listener.
 * On success *ret is a new block for kvc_daemon_detail_free; untouched on
 * failure. A kvd older than these figures answers with the daemon's totals
 * only (counting false, no methods or connections).
 * Errors: those of every call; -KVC_RESOURCE_EXHAUSTED (out of memory). */
int kvc_stats_daemon_detail(kvc *c, const struct kvc_call *call, struct kvc_daemon_detail **ret);
/* Frees what kvc_stats_daemon_detail gave; NULL is ignored. */
void kvc_daemon_detail_free(struct kvc_daemon_detail *d);
/* Merges the tenant's log, dropping versions older than revision (0:
 * merge only).
 * Errors: those of every call; -KVC_INVALID_ARGUMENT (revision in the
 * future), -KVC_RESOURCE_EXHAUSTED and -KVC_UNAVAILABLE (the merge ran out
 * of memory or disk, or met an I/O error). */
int kvc_compact(kvc *c, const struct kvc_call *call, uint64_t revision,
                struct kvc_compact_result *ret);
/* What a backup (kvc_tenant_backup) did; docs/BACKUP.md. */
struct kvc_backup_result {
	uint64_t version;         /* the backup holds every write up to it, none after */
	uint64_t segments;        /* segments in the backup */
	uint64_t segments_linked; /* of them, hard links to the tenant's own files */
	uint64_t bytes_linked;
	uint64_t bytes_copied;
	uint64_t files;
	uint64_t elapsed_us; /* on the server */
};

/* Has kvd write a backup of tenant `name` into dir, a directory on kvd's
 * host (an absolute path) that does not exist or is empty and is not inside
 * kvd's data directory; writes go on meanwhile. Needs a daemon admin token
 * where kvd checks tokens.
 * Errors: those of every call; -KVC_NOT_FOUND (the tenant),
 * -KVC_INVALID_ARGUMENT (dir not absolute, or inside the data directory),
 * -KVC_FAILED_PRECONDITION (dir exists and is not empty or not a directory,
 * its parent is missing, kvd may not write there),
 * -KVC_RESOURCE_EXHAUSTED and -KVC_UNAVAILABLE (out of space, an I/O
 * error). */
int kvc_tenant_backup(kvc *c, const struct kvc_call *call, const char *name, const char *dir,
                      struct kvc_backup_result *ret);
/* Answered also while kvd stops (status "stopping") and without a token.
 * Errors: those of every call that can reach a server. */
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
 * For tools and tests that speak the protocol themselves: the reply is not
 * decoded, so its status is not an error here.
 * Errors: -KVC_INVALID_ARGUMENT (no handle, body NULL, or larger than
 * max_message_size), -KVC_UNAVAILABLE, -KVC_DEADLINE_EXCEEDED,
 * -KVC_RESOURCE_EXHAUSTED, -KVC_CANCELLED (the transport's errors). */
int kvc_raw(kvc *c, uint32_t timeout_ms, const void *body, size_t len, void **ret_reply,
            size_t *ret_len);

#ifdef __cplusplus
}
#endif
#endif
