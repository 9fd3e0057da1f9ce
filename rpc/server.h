/*
 * server.h — the server side of the wire protocol: decoding a request
 * envelope, running a method against the store, encoding the reply. No I/O
 * of its own and no threads: kvd calls it from whichever thread the method's
 * kind (the method table in server.c) sends it to (daemon/request.c).
 *
 * A request is run in one of these ways, by its kind:
 *   - RPC_KIND_LOCAL, rpc_run_local: methods that need no tenant database
 *     open (Health, Stats, TenantCreate, TenantList, TenantInfo), run on the
 *     transport's thread that decoded them;
 *   - RPC_KIND_READ, rpc_run_read: methods that read one tenant (Get, Scan,
 *     Versions), run by the worker that owns the tenant;
 *   - RPC_KIND_MAINT: Compact, rpc_run_read on kvd's maintenance thread;
 *   - RPC_KIND_TENANT: TenantDrop, TenantPassivate, TenantActivate, on the
 *     owner worker (they wait for a running merge there);
 *   - RPC_KIND_WRITE (Put, Delete, Batch): rpc_write_prepare builds the
 *     engine ops, the owner worker submits them with kv_submit, and
 *     rpc_write_reply encodes the outcome once the batch is durable;
 *   - RPC_KIND_BLOB (BlobBegin, BlobAppend, BlobCommit, BlobAbort): the
 *     owner worker keeps the tenant's uploads (daemon/upload.c); it reads
 *     the arguments with rpc_blob_args, has the engine build the requests
 *     (kv_upload_prepare, kv_upload_commit_prepare), submits them as writes
 *     and answers with rpc_blob_reply_*. BlobInfo and BlobRead are reads.
 */
#ifndef KV_RPC_SERVER_H
#define KV_RPC_SERVER_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvengine.h"
#include "wire.h"

/* The statuses and methods are wire.h's, under the server's names. */
enum rpc_status {
#define RPC_STATUS_ENUM(name, code) RPC_##name = WIRE_##name,
	WIRE_STATUSES(RPC_STATUS_ENUM)
#undef RPC_STATUS_ENUM
};

enum rpc_method {
#define RPC_METHOD_ENUM(id, name, role) RPC_##id = WIRE_METHOD_##id,
	WIRE_METHODS(RPC_METHOD_ENUM)
#undef RPC_METHOD_ENUM
	        RPC_METHODS = WIRE_METHOD_COUNT
};

enum rpc_kind {
	RPC_KIND_LOCAL,  /* no tenant database */
	RPC_KIND_READ,   /* reads (or maintains) one tenant */
	RPC_KIND_WRITE,  /* Put, Delete, Batch */
	RPC_KIND_TENANT, /* TenantDrop/Passivate/Activate: on the tenant's worker */
	RPC_KIND_MAINT,  /* Compact: long, and drives the tenant's write path: never on its worker */
	RPC_KIND_BLOB,   /* BlobBegin/Append/Commit/Abort: the uploads of the tenant's worker */
};

#define RPC_SCAN_PAGE_MAX 10000u
#define RPC_SCAN_BYTES_MAX (4u << 20)
#define RPC_VERSIONS_MAX 1000u
#define RPC_BATCH_OPS_MAX 10000u

/* The daemon-wide figures of a Stats reply with scope "daemon", as kvd's
 * metrics endpoint counts them (daemon/metrics.c fills them in). */
#define RPC_FIG_METHODS   (RPC_METHODS + 1) /* the last: requests that did not decode */
#define RPC_FIG_CONNS_MAX 32                /* listeners reported at most */
#define RPC_FIG_OVER      UINT64_MAX        /* a percentile past the last latency bound */

struct rpc_method_fig {
	uint64_t replies[WIRE_STATUS_COUNT]; /* by status */
	uint64_t lat_count, lat_sum_ns;
	uint64_t p50_ns, p90_ns, p99_ns; /* upper bounds of their buckets, or RPC_FIG_OVER */
};

struct rpc_conn_fig {
	const char *transport; /* "stream" (kv+…://) or "nng" */
	const char *listen;    /* the listener's address; lives as long as the daemon */
	uint64_t open;
};

struct rpc_daemon_fig {
	bool counting; /* the request figures are kept (metrics on); else they stay 0 */
	uint64_t received_bytes, sent_bytes;
	struct rpc_method_fig methods[RPC_FIG_METHODS];
	size_t nconns;
	struct rpc_conn_fig conns[RPC_FIG_CONNS_MAX];
};

/* Cluster mode: a tenant's owner, as TenantList shows it. */
struct rpc_owner {
	char tenant[KV_TENANT_NAME_MAX + 1];
	char node[65];
	uint64_t epoch;
};

/* Limits and identity of the server, set once by kvd. */
struct rpc_limits {
	uint32_t max_value_size;
	const struct kv_tenant_config *defaults; /* TenantCreate starts from these */
	const char *version;
	/* Fills in the daemon-wide figures for Stats (any thread); NULL: the
	 * reply has only the daemon's totals. */
	void (*figures)(void *arg, struct rpc_daemon_fig *ret);
	void *figures_arg;
	/* Cluster mode: every tenant that has an owner, sorted by tenant name
	 * (malloc'd; the caller frees it): 0, or a negative errno when they
	 * cannot be read (TenantList then answers UNAVAILABLE). NULL: no
	 * cluster, TenantList shows no owners. */
	int (*owners)(void *arg, struct rpc_owner **ret, size_t *ret_n);
	void *owners_arg;
};

struct rpc_req {
	msgpack_zone zone;
	msgpack_object root;
	uint64_t id;
	uint64_t client;
	bool has_client;
	enum rpc_method method;
	enum rpc_kind kind;
	char tenant[KV_TENANT_NAME_MAX + 1]; /* where it runs: the tenant, or args.name */
	uint64_t timeout_ms;
	const msgpack_object *args;
	const char *token; /* the request's token (into its bytes), NULL: none */
	size_t token_len;
	/* Set by whoever checked the request's token: TenantList lists only the
	 * tenants may_see(grant, name) is true of; NULL: all. */
	bool (*may_see)(const void *grant, const char *tenant);
	const void *grant;
	char errbuf[160]; /* a decode error message that names what was wrong */
};

/* A reply being built. pk writes into buf through rp itself: an rpc_reply
 * is not copied or moved once initialised. */
struct rpc_reply {
	msgpack_sbuffer buf;
	msgpack_packer pk;
	int status;        /* the status the reply carries */
	bool write_failed; /* a write into buf failed (out of memory): buf is not a whole
	                      reply, and later writes are skipped until it restarts */
};

void rpc_reply_init(struct rpc_reply *rp);
void rpc_reply_release(struct rpc_reply *rp);
/* The reply becomes a copy of len bytes of an earlier whole reply. */
void rpc_reply_bytes(struct rpc_reply *rp, const void *p, size_t len);
/* Makes rp whole before it is sent: when a write into it failed, it becomes
 * a RESOURCE_EXHAUSTED error of id instead of a truncated reply. 0; -ENOMEM
 * when not even that could be written (buf is then empty). */
int rpc_reply_finish(struct rpc_reply *rp, uint64_t id);
void rpc_reply_error(struct rpc_reply *rp, uint64_t id, int status, const char *message);
/* A MOVED reply: the tenant is served by node `node` at `address` (its
 * epoch), with a one-line message for clients that do not follow it. */
void rpc_reply_moved(struct rpc_reply *rp, uint64_t id, const char *message, const char *node,
                     const char *address, uint64_t epoch);
/* Starts an OK reply whose result map has `fields` entries. */
void rpc_reply_ok(struct rpc_reply *rp, uint64_t id, uint32_t fields);

/* Decodes body into r (r->zone is initialised here; release with
 * rpc_req_release also on failure). On failure *ret_status and *ret_msg say
 * what to answer; r->id is set whenever it could be read. */
int rpc_req_decode(struct rpc_req *r, const struct rpc_limits *lim, const void *body, size_t len,
                   int *ret_status, const char **ret_msg);
void rpc_req_release(struct rpc_req *r);
/* The role (enum wire_role) a decoded request needs: its method's, and
 * WIRE_ROLE_DAEMON for Stats with scope "daemon". */
int rpc_req_role(const struct rpc_req *r);

/* Maps an engine or store error to a status code and a message. */
int rpc_status_of(int err);
const char *rpc_message_of(int err);
/* The message for err from using tenant: "tenant 'w' not found", "tenant 'w'
 * is refused: tenants/w/TENANT: line 3: …" (the store says why), or
 * "tenant 'w': " and rpc_message_of(err). */
void rpc_tenant_message(kv_store *s, const char *tenant, int err, char *buf, size_t size);

/* Runs a RPC_KIND_LOCAL method. */
void rpc_run_local(kv_store *s, const struct rpc_limits *lim, const struct rpc_req *r,
                   uint64_t uptime_s, uint64_t requests, uint64_t in_flight, uint32_t workers,
                   bool stopping, struct rpc_reply *out);

/* Runs a RPC_KIND_READ or RPC_KIND_MAINT method on an acquired tenant. */
void rpc_run_read(kv_store *s, kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out);

/* Runs TenantDrop/TenantPassivate/TenantActivate (the caller made sure the
 * tenant has no requests of its own in flight). */
void rpc_run_tenant(kv_store *s, const struct rpc_req *r, struct rpc_reply *out);

/* Builds the engine ops of a write; their keys and values point into the
 * request. NULL/0 and the reply written to *err_out on a bad request. */
int rpc_write_prepare(const struct rpc_req *r, const struct kv_tenant_config *cfg,
                      const struct rpc_limits *lim, struct kv_op **ret_ops, size_t *ret_n,
                      struct rpc_reply *err_out);
/* Encodes the reply of a finished write. */
void rpc_write_reply(const struct rpc_req *r, int status, const struct kv_op *ops, size_t n,
                     struct rpc_reply *out);

/* The arguments of BlobBegin, BlobAppend, BlobCommit and BlobAbort, read
 * (key and data point into the request). */
struct rpc_blob_args {
	const void *key; /* BlobBegin */
	size_t key_len;
	uint64_t chunk_size;       /* BlobBegin; 0: the engine's default */
	uint64_t upload;           /* the others */
	uint64_t offset;           /* BlobAppend */
	const void *data;          /* BlobAppend (NULL with len 0: an empty bin) */
	size_t len;
	uint64_t size;             /* BlobCommit */
	struct kv_write_opts opts; /* BlobCommit: if_version (KV_ANY_VERSION when absent),
	                              ttl_ms (0 when absent) */
	bool has_ttl;              /* BlobCommit: ttl_ms was given (else the tenant's
	                              default TTL applies, as for Put) */
};
/* 0, or -EINVAL with the error reply written to *err_out. */
int rpc_blob_args(const struct rpc_req *r, struct rpc_blob_args *ret, struct rpc_reply *err_out);
/* BlobBegin's result {upload, chunk_size}. */
void rpc_blob_reply_begin(struct rpc_reply *out, uint64_t id, uint64_t upload, uint32_t chunk_size);
/* An OK result {field: v}; field NULL: an empty result (BlobAbort). */
void rpc_blob_reply_uint(struct rpc_reply *out, uint64_t id, const char *field, uint64_t v);
/* rpc_reply_error with a printf message (cut to 255 bytes). */
void rpc_reply_errorf(struct rpc_reply *rp, uint64_t id, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

const char *rpc_method_name(enum rpc_method m);

#endif
