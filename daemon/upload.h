/*
 * upload.h — the blob uploads of one worker (BlobBegin, BlobAppend,
 * BlobCommit, BlobAbort; rpc/PROTOCOL.md, "Blobs"). A tenant's uploads live
 * on the worker that owns the tenant, in that worker's table, which only its
 * thread touches: no lock.
 *
 * Threads: every call on the owning worker's thread.
 */
#ifndef KVD_UPLOAD_H
#define KVD_UPLOAD_H

#include <stdbool.h>
#include <stdint.h>

struct kvd;
struct worker;
struct job;
struct upload;

#define UPLOADS_MAX       4096u /* uploads open at once per worker */
/* the chunk sizes of a worker's open uploads summed, at most (each may hold up
 * to a chunk of bytes in memory between two requests) */
#define UPLOAD_BUF_BUDGET (256ull << 20)
#define UPLOAD_KEEP_MS    60000u /* a committed upload answers a resent BlobCommit this long, */
#define UPLOAD_KEPT_MAX   16384u /* while it is among the last this many of the worker's */
#define UPLOAD_TICK_MS    100u   /* uploads_tick looks for idle uploads this often at most */
#define UPLOAD_BUCKETS    1024u  /* hash buckets of the table, by id */

struct uploads {
	struct upload *bucket[UPLOAD_BUCKETS]; /* by id */
	struct upload *oldest, *newest;        /* every upload, in the order they began */
	uint32_t open, kept;                   /* open; committed and remembered */
	uint64_t buffered;                     /* chunk sizes of the open ones, summed */
	struct job *ready, *ready_tail;        /* waited for a request of their upload: run next */
	uint64_t last_tick_ms;
};

/* Runs a BlobBegin/Append/Commit/Abort request (j->req.kind RPC_KIND_BLOB). */
void uploads_run(struct worker *w, struct job *j);
/* Each turn of the worker's loop: runs the requests that waited for their
 * upload's request in flight, and (every UPLOAD_TICK_MS) aborts the uploads
 * idle for upload_idle_ms or of a tenant this node no longer serves, and
 * forgets committed ones after UPLOAD_KEEP_MS. */
void uploads_tick(struct worker *w);
/* Aborts every upload of tenant (none has a request in flight: the caller
 * drained the tenant's writes), before it is passivated, dropped or
 * released. */
void uploads_abort_tenant(struct worker *w, const char *tenant);
/* At the worker's end, after its writes were drained: aborts every upload
 * and answers the requests still waiting (UNAVAILABLE). */
void uploads_close_all(struct worker *w);

#endif
