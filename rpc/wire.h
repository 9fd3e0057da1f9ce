/*
 * wire.h — kvd's wire protocol in C: the one copy of the constants that
 * rpc/PROTOCOL.md defines, for the client library, kvctl and the server.
 *
 * What is here: the protocol version, the status codes (gRPC's canonical
 * codes) and their names, the method table (with the role each needs),
 * the field names of requests and replies, the key size PROTOCOL.md
 * promises, and the stream framing's hello and frame header. What is not
 * here: settings and defaults (each side's own header), and how a message
 * is packed (rpc/mp.h, rpc/client_codec.c, rpc/server.c).
 *
 * Header only, no state; any thread. A new method is a row in WIRE_METHODS,
 * the server's body and the client's call.
 */
#ifndef KVD_WIRE_H
#define KVD_WIRE_H

#include <stdint.h>

/* The "v" of every request; the last byte of the stream hello. */
#define WIRE_VERSION 1

/* Keys are 1 … WIRE_KEY_MAX bytes (PROTOCOL.md, "Idempotent writes and
 * limits"). */
#define WIRE_KEY_MAX 65536u

/* ---- status codes (PROTOCOL.md, "Status codes") -------------------------- */

/* X(name, code): every code a reply's "status" may carry: gRPC's canonical
 * codes, and kvd's own MOVED past them (a tenant another node of the
 * cluster serves; the reply's result says which, WIRE_F_NODE and
 * WIRE_F_ADDRESS). */
#define WIRE_STATUSES(X)                                                                           \
	X(OK, 0)                                                                                   \
	X(CANCELLED, 1)                                                                            \
	X(UNKNOWN, 2)                                                                              \
	X(INVALID_ARGUMENT, 3)                                                                     \
	X(DEADLINE_EXCEEDED, 4)                                                                    \
	X(NOT_FOUND, 5)                                                                            \
	X(ALREADY_EXISTS, 6)                                                                       \
	X(PERMISSION_DENIED, 7)                                                                    \
	X(RESOURCE_EXHAUSTED, 8)                                                                   \
	X(FAILED_PRECONDITION, 9)                                                                  \
	X(ABORTED, 10)                                                                             \
	X(OUT_OF_RANGE, 11)                                                                        \
	X(UNIMPLEMENTED, 12)                                                                       \
	X(INTERNAL, 13)                                                                            \
	X(UNAVAILABLE, 14)                                                                         \
	X(DATA_LOSS, 15)                                                                           \
	X(UNAUTHENTICATED, 16)                                                                     \
	X(MOVED, 17)

enum wire_status {
#define WIRE_STATUS_ENUM(name, code) WIRE_##name = code,
	WIRE_STATUSES(WIRE_STATUS_ENUM)
#undef WIRE_STATUS_ENUM
	        WIRE_STATUS_COUNT
};

/* ---- methods (PROTOCOL.md, "Methods") ------------------------------------ */

#define WIRE_M_PUT              "Put"
#define WIRE_M_GET              "Get"
#define WIRE_M_DELETE           "Delete"
#define WIRE_M_SCAN             "Scan"
#define WIRE_M_VERSIONS         "Versions"
#define WIRE_M_BATCH            "Batch"
#define WIRE_M_COMPACT          "Compact"
#define WIRE_M_STATS            "Stats"
#define WIRE_M_TENANT_CREATE    "TenantCreate"
#define WIRE_M_TENANT_DROP      "TenantDrop"
#define WIRE_M_TENANT_LIST      "TenantList"
#define WIRE_M_TENANT_INFO      "TenantInfo"
#define WIRE_M_TENANT_PASSIVATE "TenantPassivate"
#define WIRE_M_TENANT_ACTIVATE  "TenantActivate"
#define WIRE_M_HEALTH           "Health"
#define WIRE_M_TENANT_RELEASE   "TenantRelease"
#define WIRE_M_TENANT_ADOPT     "TenantAdopt"
#define WIRE_M_BACKUP           "Backup"
#define WIRE_M_BLOB_BEGIN       "BlobBegin"
#define WIRE_M_BLOB_APPEND      "BlobAppend"
#define WIRE_M_BLOB_COMMIT      "BlobCommit"
#define WIRE_M_BLOB_ABORT       "BlobAbort"
#define WIRE_M_BLOB_INFO        "BlobInfo"
#define WIRE_M_BLOB_READ        "BlobRead"

/* Who may call a method when kvd checks tokens (PROTOCOL.md,
 * "Authentication and roles"). READ < WRITE < ADMIN are roles on a tenant,
 * each including the ones before; DAEMON is daemon=admin. */
enum wire_role {
	WIRE_ROLE_NONE,   /* anyone, no token needed */
	WIRE_ROLE_ANY,    /* any known token (what it sees is filtered) */
	WIRE_ROLE_READ,   /* read on the request's tenant */
	WIRE_ROLE_WRITE,  /* write on the request's tenant */
	WIRE_ROLE_ADMIN,  /* admin of the request's tenant */
	WIRE_ROLE_DAEMON, /* daemon admin */
};

/* X(id, name, role): every method and the role it needs (Stats with scope
 * "daemon" needs WIRE_ROLE_DAEMON); enum wire_method numbers them in this
 * order. */
#define WIRE_METHODS(X)                                                                            \
	X(PUT, WIRE_M_PUT, WIRE_ROLE_WRITE)                                                        \
	X(GET, WIRE_M_GET, WIRE_ROLE_READ)                                                         \
	X(DELETE, WIRE_M_DELETE, WIRE_ROLE_WRITE)                                                  \
	X(SCAN, WIRE_M_SCAN, WIRE_ROLE_READ)                                                       \
	X(VERSIONS, WIRE_M_VERSIONS, WIRE_ROLE_READ)                                               \
	X(BATCH, WIRE_M_BATCH, WIRE_ROLE_WRITE)                                                    \
	X(COMPACT, WIRE_M_COMPACT, WIRE_ROLE_ADMIN)                                                \
	X(STATS, WIRE_M_STATS, WIRE_ROLE_READ)                                                     \
	X(TENANT_CREATE, WIRE_M_TENANT_CREATE, WIRE_ROLE_DAEMON)                                   \
	X(TENANT_DROP, WIRE_M_TENANT_DROP, WIRE_ROLE_DAEMON)                                       \
	X(TENANT_LIST, WIRE_M_TENANT_LIST, WIRE_ROLE_ANY)                                          \
	X(TENANT_INFO, WIRE_M_TENANT_INFO, WIRE_ROLE_ADMIN)                                        \
	X(TENANT_PASSIVATE, WIRE_M_TENANT_PASSIVATE, WIRE_ROLE_ADMIN)                              \
	X(TENANT_ACTIVATE, WIRE_M_TENANT_ACTIVATE, WIRE_ROLE_ADMIN)                                \
	X(HEALTH, WIRE_M_HEALTH, WIRE_ROLE_NONE)                                                   \
	X(TENANT_RELEASE, WIRE_M_TENANT_RELEASE, WIRE_ROLE_DAEMON)                                 \
	X(TENANT_ADOPT, WIRE_M_TENANT_ADOPT, WIRE_ROLE_DAEMON)                                     \
	X(BACKUP, WIRE_M_BACKUP, WIRE_ROLE_DAEMON)                                                 \
	X(BLOB_BEGIN, WIRE_M_BLOB_BEGIN, WIRE_ROLE_WRITE)                                          \
	X(BLOB_APPEND, WIRE_M_BLOB_APPEND, WIRE_ROLE_WRITE)                                        \
	X(BLOB_COMMIT, WIRE_M_BLOB_COMMIT, WIRE_ROLE_WRITE)                                        \
	X(BLOB_ABORT, WIRE_M_BLOB_ABORT, WIRE_ROLE_WRITE)                                          \
	X(BLOB_INFO, WIRE_M_BLOB_INFO, WIRE_ROLE_READ)                                             \
	X(BLOB_READ, WIRE_M_BLOB_READ, WIRE_ROLE_READ)

enum wire_method {
#define WIRE_METHOD_ENUM(id, name, role) WIRE_METHOD_##id,
	WIRE_METHODS(WIRE_METHOD_ENUM)
#undef WIRE_METHOD_ENUM
	        WIRE_METHOD_COUNT
};

/* ---- field names (PROTOCOL.md, "Envelope" and each method) --------------- */

/* The request envelope. */
#define WIRE_F_V          "v"
#define WIRE_F_ID         "id"
#define WIRE_F_CLIENT     "client"
#define WIRE_F_METHOD     "method"
#define WIRE_F_TENANT     "tenant"
#define WIRE_F_TIMEOUT_MS "timeout_ms"
#define WIRE_F_TOKEN      "token"
#define WIRE_F_ARGS       "args"

/* The reply envelope (and "id" above). */
#define WIRE_F_STATUS  "status"
#define WIRE_F_MESSAGE "message"
#define WIRE_F_RESULT  "result"

/* Arguments and results. */
#define WIRE_F_KEY               "key"
#define WIRE_F_VALUE             "value"
#define WIRE_F_VERSION           "version"
#define WIRE_F_AS_OF             "as_of"
#define WIRE_F_IF_VERSION        "if_version"
#define WIRE_F_TTL_MS            "ttl_ms"
#define WIRE_F_TIMESTAMP_MS      "timestamp_ms"
#define WIRE_F_EXPIRY_MS         "expiry_ms"
#define WIRE_F_START             "start"
#define WIRE_F_END               "end"
#define WIRE_F_PREFIX            "prefix"
#define WIRE_F_LIMIT             "limit"
#define WIRE_F_REVERSE           "reverse"
#define WIRE_F_KEYS_ONLY         "keys_only"
#define WIRE_F_CONTINUATION      "continuation"
#define WIRE_F_ITEMS             "items"
#define WIRE_F_REVISION          "revision"
#define WIRE_F_MORE              "more"
#define WIRE_F_BEFORE            "before"
#define WIRE_F_VALUES            "values"
#define WIRE_F_VERSIONS          "versions"
#define WIRE_F_TRUNCATED         "truncated"
#define WIRE_F_OPS               "ops"
#define WIRE_F_OP                "op"
#define WIRE_F_FAILED_OP         "failed_op"
#define WIRE_F_SCOPE             "scope"
#define WIRE_F_NAME              "name"
#define WIRE_F_SYNC              "sync"
#define WIRE_F_SYNC_INTERVAL_MS  "sync_interval_ms"
#define WIRE_F_HISTORY           "history"
#define WIRE_F_MAX_KEYS          "max_keys"
#define WIRE_F_COMPRESSION       "compression"
#define WIRE_F_MAX_BYTES         "max_bytes"
#define WIRE_F_EVICT             "evict"
#define WIRE_F_EVICTIONS         "evictions"
#define WIRE_F_TOMBSTONE_BYTES   "tombstone_bytes"
#define WIRE_F_STATE             "state"
#define WIRE_F_TENANTS           "tenants"
#define WIRE_F_IO_URING          "io_uring"
#define WIRE_F_READ_ONLY         "read_only"
#define WIRE_F_COMPACT_REVISION  "compact_revision"
#define WIRE_F_DISK_BYTES_BEFORE "disk_bytes_before"
#define WIRE_F_DISK_BYTES_AFTER  "disk_bytes_after"
#define WIRE_F_ACTIVATION_US     "activation_us"
#define WIRE_F_UPTIME_S          "uptime_s"
/* cluster mode (docs/CLUSTER.md): MOVED's result, TenantAdopt's,
 * TenantInfo's and TenantList's owner */
#define WIRE_F_NODE              "node"
#define WIRE_F_ADDRESS           "address"
#define WIRE_F_EPOCH             "epoch"
#define WIRE_F_OWNER             "owner"
/* Backup (docs/BACKUP.md) */
#define WIRE_F_DIR               "dir"
#define WIRE_F_SEGMENTS_LINKED   "segments_linked"
#define WIRE_F_BYTES_LINKED      "bytes_linked"
#define WIRE_F_BYTES_COPIED      "bytes_copied"
#define WIRE_F_FILES             "files"
#define WIRE_F_ELAPSED_US        "elapsed_us"
/* blobs (PROTOCOL.md, "Blobs") */
#define WIRE_F_UPLOAD            "upload"
#define WIRE_F_CHUNK_SIZE        "chunk_size"
#define WIRE_F_OFFSET            "offset"
#define WIRE_F_LENGTH            "length"
#define WIRE_F_DATA              "data"
#define WIRE_F_SIZE              "size"
#define WIRE_F_CHUNKS            "chunks"
#define WIRE_F_XXH64             "xxh64"
#define WIRE_F_STORED_BYTES      "stored_bytes"
#define WIRE_F_BLOB              "blob"
#define WIRE_F_BLOB_SIZE         "blob_size"

/* BlobRead gives at most this many bytes per call (PROTOCOL.md, "BlobRead"). */
#define WIRE_BLOB_READ_MAX (4u << 20)

/* What Stats, TenantInfo, TenantList and Health answer, and other fields
 * only the server reads or writes. */
#define WIRE_F_DEVICE_EXTENTS     "device_extents"
#define WIRE_F_DEVICE_EXTENTS_FREE "device_extents_free"
#define WIRE_F_DEVICE_EXTENT_SIZE "device_extent_size"
#define WIRE_F_DEVICE_CACHE_HITS  "device_cache_hits"
#define WIRE_F_DEVICE_CACHE_MISSES "device_cache_misses"
#define WIRE_F_ACTIVATIONS        "activations"
#define WIRE_F_ACTIVE_TENANTS     "active_tenants"
#define WIRE_F_BATCHED_WRITES     "batched_writes"
#define WIRE_F_BATCHES            "batches"
#define WIRE_F_DEAD_BYTES         "dead_bytes"
#define WIRE_F_DISK_BYTES         "disk_bytes"
#define WIRE_F_IDLE_S             "idle_s"
#define WIRE_F_IN_FLIGHT          "in_flight"
#define WIRE_F_VALUE_LOGICAL_BYTES "value_logical_bytes"
#define WIRE_F_VALUE_STORED_BYTES "value_stored_bytes"
#define WIRE_F_VALUES_COMPRESSED  "values_compressed"
#define WIRE_F_KEYDIR_BYTES       "keydir_bytes"
#define WIRE_F_KEYS               "keys"
#define WIRE_F_LAST_ACTIVATION_MS "last_activation_ms"
#define WIRE_F_LAST_ACTIVATION_US "last_activation_us"
#define WIRE_F_LAST_VERSION       "last_version"
#define WIRE_F_LIVE_BYTES         "live_bytes"
#define WIRE_F_MERGES             "merges"
#define WIRE_F_REQUESTS           "requests"
#define WIRE_F_SEGMENTS           "segments"
#define WIRE_F_SYNCS              "syncs"
#define WIRE_F_TOMBSTONES         "tombstones"
#define WIRE_F_WORKERS            "workers"
/* Stats (daemon): the figures of the metrics endpoint */
#define WIRE_F_COUNTING           "counting"
#define WIRE_F_RECEIVED_BYTES     "received_bytes"
#define WIRE_F_SENT_BYTES         "sent_bytes"
#define WIRE_F_METHODS            "methods"
#define WIRE_F_ERRORS             "errors"
#define WIRE_F_STATUSES           "statuses"
#define WIRE_F_LATENCY_COUNT      "latency_count"
#define WIRE_F_LATENCY_SUM_NS     "latency_sum_ns"
#define WIRE_F_P50_NS             "p50_ns"
#define WIRE_F_P90_NS             "p90_ns"
#define WIRE_F_P99_NS             "p99_ns"
#define WIRE_F_CONNECTIONS        "connections"
#define WIRE_F_TRANSPORT          "transport"
#define WIRE_F_LISTEN             "listen"
#define WIRE_F_OPEN               "open"

/* ---- stream framing (PROTOCOL.md, "Stream framing") ---------------------- */

/* Each side's first bytes: "kvd\0" and the framing version, big-endian. */
#define WIRE_HELLO_LEN 8
#define WIRE_HELLO_INIT                                                                            \
	{                                                                                          \
		'k', 'v', 'd', 0, 0, 0, 0, WIRE_VERSION                                            \
	}

/* Then frames: a 4-byte big-endian length, then that many bytes of one
 * msgpack message. */
#define WIRE_FRAME_HDR 4

static inline void wire_frame_hdr_put(uint8_t hdr[WIRE_FRAME_HDR], uint32_t len)
{
	hdr[0] = (uint8_t)(len >> 24);
	hdr[1] = (uint8_t)(len >> 16);
	hdr[2] = (uint8_t)(len >> 8);
	hdr[3] = (uint8_t)len;
}

static inline uint32_t wire_frame_hdr_get(const uint8_t hdr[WIRE_FRAME_HDR])
{
	return (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 |
	       (uint32_t)hdr[3];
}

#endif
