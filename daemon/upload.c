/*
 * upload.c — blob uploads (rpc/PROTOCOL.md, "Blobs") on the worker that owns
 * their tenant: BlobBegin opens an engine upload (kv_upload_open) under a
 * random 64-bit id, BlobAppend hands it bytes (kv_upload_prepare: the whole
 * chunks they complete become one engine request, submitted as a write),
 * BlobCommit writes the last chunk and the descriptor (kv_upload_commit_prepare),
 * BlobAbort closes it. Each engine request ends in upload_done, which tells
 * the upload (kv_upload_written) and answers.
 *
 * What it owns: the worker's table of uploads (struct uploads, in struct
 * worker), touched only by that worker's thread: no lock.
 *
 * Invariants:
 *   1. An open upload holds one store reference on its tenant (kv_store_get),
 *      so its database stays open (and is not passivated for idleness)
 *      while the upload lives; the reference goes when the upload commits,
 *      fails or is aborted. Every upload of a tenant is aborted before the
 *      worker passivates, drops or releases it (uploads_abort_tenant) and
 *      when the worker ends (uploads_close_all), so kv_upload_close always
 *      comes before the database's kv_close.
 *   2. At most one request of an upload is with the engine (up->inflight);
 *      requests of that upload arriving meanwhile wait on its list and run,
 *      in order, from the worker's loop once it is answered (ready list),
 *      never from inside the engine's completion.
 *   3. BlobAppend is applied once per byte: one whose bytes the upload
 *      already has (offset + length ≤ its size) is answered with the size
 *      and not applied; any other offset than the size is refused. A
 *      committed upload is remembered UPLOAD_KEEP_MS with its version (while
 *      it is among the worker's last UPLOAD_KEPT_MAX, give or take the
 *      commits of one UPLOAD_TICK_MS), so a resent BlobCommit gets the same
 *      answer. At most UPLOADS_MAX are open per worker, and their chunk
 *      sizes add up to UPLOAD_BUF_BUDGET at most (each holds up to a chunk
 *      of bytes between two requests). With a client id, the
 *      worker's de-duplication table (dedup.c) also answers repeats of any
 *      of these requests (BlobBegin too) from the first.
 *   4. An upload with no request for upload_idle_ms (the client is taken to
 *      be gone), or of a tenant this node no longer serves under the epoch
 *      the upload began in (cluster mode: released, fenced, taken by
 *      another node meanwhile), is aborted, by uploads_tick or by its next
 *      request; an unknown or aborted id is NOT_FOUND.
 */
#include "upload.h"

#include "cluster.h"
#include "dedup.h"
#include "kvd.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

enum upload_state {
	UP_OPEN,      /* taking bytes */
	UP_COMMITTED, /* done: remembered for a resent BlobCommit */
};

struct upload {
	uint64_t id;
	char tenant[KV_TENANT_NAME_MAX + 1];
	struct worker *w;
	kv_tenant *t; /* the store reference of an open upload (invariant 1) */
	kv_upload *u; /* NULL once committed */
	enum upload_state state;
	uint64_t version; /* committed */
	uint64_t epoch;   /* cluster_serving_epoch of its tenant when it began */
	uint32_t chunk_size;
	uint64_t last_ms;                  /* the last request (or its answer) */
	struct job *inflight;              /* with the engine (invariant 2) */
	struct busy *busy;                 /* its tenant's, while inflight */
	struct job *wait_head, *wait_tail; /* waiting for inflight */
	struct upload *hnext;              /* its hash bucket's chain */
	struct upload *prev, *next;        /* the table's list, oldest first */
};

#define NO_SUCH_UPLOAD "no such upload (never begun, aborted, failed, or committed long ago)"

static struct uploads *table(struct worker *w)
{
	return worker_uploads(w);
}

static struct upload **bucket_of(struct worker *w, uint64_t id)
{
	return &table(w)->bucket[(id ^ (id >> 32)) % UPLOAD_BUCKETS];
}

static struct upload *upload_find(struct worker *w, const char *tenant, uint64_t id)
{
	for (struct upload *up = *bucket_of(w, id); up != NULL; up = up->hnext)
		if (up->id == id && strcmp(up->tenant, tenant) == 0)
			return up;
	return NULL;
}

static bool id_taken(struct worker *w, uint64_t id)
{
	for (struct upload *up = *bucket_of(w, id); up != NULL; up = up->hnext)
		if (up->id == id)
			return true;
	return false;
}

static void table_add(struct worker *w, struct upload *up)
{
	struct uploads *ups = table(w);
	struct upload **b = bucket_of(w, up->id);

	up->hnext = *b;
	*b = up;
	up->prev = ups->newest;
	up->next = NULL;
	if (ups->newest != NULL)
		ups->newest->next = up;
	else
		ups->oldest = up;
	ups->newest = up;
	ups->open++;
	ups->buffered += up->chunk_size;
}

/* An open upload ends (committed or freed). */
static void table_closed(struct worker *w, struct upload *up)
{
	table(w)->open--;
	table(w)->buffered -= up->chunk_size;
}

static void table_remove(struct worker *w, struct upload *up)
{
	struct uploads *ups = table(w);
	struct upload **pp;

	for (pp = bucket_of(w, up->id); *pp != NULL; pp = &(*pp)->hnext)
		if (*pp == up) {
			*pp = up->hnext;
			break;
		}
	if (up->prev != NULL)
		up->prev->next = up->next;
	else
		ups->oldest = up->next;
	if (up->next != NULL)
		up->next->prev = up->prev;
	else
		ups->newest = up->prev;
	if (up->state == UP_OPEN)
		table_closed(w, up);
	else
		ups->kept--;
}

/* Closes the engine upload and lets go of the tenant. */
static void upload_release(struct worker *w, struct upload *up)
{
	if (up->u != NULL) {
		kv_upload_close(up->u);
		up->u = NULL;
	}
	if (up->t != NULL) {
		kv_store_put(worker_kvd(w)->store, up->t);
		up->t = NULL;
	}
}

/* Takes up out of the table and frees it; requests waiting on it go to the
 * ready list (they find it gone: NOT_FOUND). */
static void upload_free(struct worker *w, struct upload *up, bool aborted)
{
	struct uploads *ups = table(w);

	assert(up->inflight == NULL);
	table_remove(w, up);
	if (up->wait_head != NULL) {
		if (ups->ready_tail != NULL)
			ups->ready_tail->next = up->wait_head;
		else
			ups->ready = up->wait_head;
		ups->ready_tail = up->wait_tail;
	}
	if (up->state == UP_OPEN)
		metrics_upload(-1, aborted);
	upload_release(w, up);
	free(up);
}

static void abort_upload(struct worker *w, struct upload *up, const char *why);

/* ---- answers ------------------------------------------------------------- */

/* Sends j's reply, and the same bytes to its repeats; remembers it for
 * later repeats when j has a client id (invariant 3). */
static void answer(struct worker *w, struct job *j, struct rpc_reply *rp)
{
	struct job *dup = j->dup_next;

	rpc_reply_finish(rp, j->req.id);
	if (j->req.has_client) {
		uint64_t now = now_ms();
		struct dedup_ent *e = dedup_find(worker_dedup(w), j->req.client, j->req.id, now);
		if (e != NULL && e->pending == j)
			dedup_answered(worker_dedup(w), e, rp->buf.data, rp->buf.size, now);
	}
	while (dup != NULL) {
		struct job *next = dup->dup_next;
		struct rpc_reply copy;
		rpc_reply_init(&copy);
		rpc_reply_bytes(&copy, rp->buf.data, rp->buf.size);
		job_reply(dup, &copy);
		dup = next;
	}
	j->upload = NULL;
	job_reply(j, rp);
}

static void answer_error(struct worker *w, struct job *j, int status, const char *msg)
{
	struct rpc_reply rp;

	rpc_reply_init(&rp);
	rpc_reply_error(&rp, j->req.id, status, msg);
	answer(w, j, &rp);
}

static void answer_kv_error(struct worker *w, struct job *j, int err)
{
	answer_error(w, j, rpc_status_of(err), rpc_message_of(err));
}

static void answer_uint(struct worker *w, struct job *j, const char *field, uint64_t v)
{
	struct rpc_reply rp;

	rpc_reply_init(&rp);
	rpc_blob_reply_uint(&rp, j->req.id, field, v);
	answer(w, j, &rp);
}

/* ---- the engine's requests ----------------------------------------------- */

static void upload_done(struct kv_req *kreq, int status)
{
	struct job *j = kreq->arg;
	struct upload *up = j->upload;
	struct worker *w = up->w;
	uint64_t version = 0;
	int rv;

	rv = kv_upload_written(up->u, kreq, status, &version);
	worker_busy_inflight(up->busy, -1);
	up->busy = NULL;
	up->inflight = NULL;
	up->last_ms = now_ms();
	if (rv != 0) {
		/* the upload failed (a chunk not written, the commit's
		 * condition refused): nothing of it is visible */
		if (rv == -EIO)
			klog(LOG_ERR, "tenant %s: upload %016" PRIx64 ": a write failed: %s",
			     up->tenant, up->id, kv_strerror(rv));
		upload_free(w, up, true);
		answer_kv_error(w, j, rv);
		return;
	}
	if (j->req.method == RPC_BLOB_COMMIT) {
		table_closed(w, up);
		table(w)->kept++;
		up->state = UP_COMMITTED;
		up->version = version;
		metrics_upload(-1, false);
		upload_release(w, up);
		answer_uint(w, j, WIRE_F_VERSION, version);
	} else {
		answer_uint(w, j, WIRE_F_SIZE, kv_upload_size(up->u));
	}
	/* the requests that waited for this one: next, from the loop */
	if (up->wait_head != NULL) {
		struct uploads *ups = table(w);
		if (ups->ready_tail != NULL)
			ups->ready_tail->next = up->wait_head;
		else
			ups->ready = up->wait_head;
		ups->ready_tail = up->wait_tail;
		up->wait_head = up->wait_tail = NULL;
	}
}

/* Submits the request kv_upload_prepare or kv_upload_commit_prepare put
 * in j->kreq (n > 0). */
static void upload_submit(struct worker *w, struct upload *up, struct job *j)
{
	int rv;

	if ((up->busy = worker_busy(w, up->t)) == NULL) {
		kv_upload_written(up->u, &j->kreq, -ENOMEM, NULL);
		upload_free(w, up, true);
		answer_error(w, j, RPC_INTERNAL, "cannot watch the tenant's log");
		return;
	}
	j->kreq.done = upload_done;
	j->kreq.arg = j;
	j->upload = up;
	if ((rv = kv_submit(kv_tenant_db(up->t), &j->kreq)) != 0) {
		kv_upload_written(up->u, &j->kreq, rv, NULL);
		up->busy = NULL;
		upload_free(w, up, true);
		answer_kv_error(w, j, rv);
		return;
	}
	worker_busy_inflight(up->busy, +1);
	up->inflight = j;
}

/* ---- the methods ---------------------------------------------------------- */

static uint64_t new_id(struct worker *w)
{
	uint64_t id = 0;

	do {
		if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
			id = (now_ms() << 20) ^ (uint64_t)(uintptr_t)&id ^ table(w)->open;
	} while (id == 0 || id_taken(w, id));
	return id;
}

static void run_begin(struct worker *w, struct job *j, const struct rpc_blob_args *a)
{
	struct kvd *d = worker_kvd(w);
	struct uploads *ups = table(w);
	struct upload *up;
	struct rpc_reply rp;
	uint32_t cs = a->chunk_size != 0 ? (uint32_t)a->chunk_size : KV_BLOB_CHUNK_DEFAULT;
	kv_tenant *t;
	int rv;

	if (ups->open >= UPLOADS_MAX || ups->buffered + cs > UPLOAD_BUF_BUDGET) {
		answer_error(w, j, RPC_RESOURCE_EXHAUSTED,
		             "too many blob uploads open on this worker; try again later");
		return;
	}
	if ((up = calloc(1, sizeof(*up))) == NULL) {
		answer_kv_error(w, j, -ENOMEM);
		return;
	}
	if ((rv = kv_store_get(d->store, j->req.tenant, &t)) != 0) {
		char msg[512];
		free(up);
		rpc_tenant_message(d->store, j->req.tenant, rv, msg, sizeof(msg));
		answer_error(w, j, rpc_status_of(rv), msg);
		return;
	}
	rv = kv_upload_open(kv_tenant_db(t), a->key, a->key_len, (uint32_t)a->chunk_size, &up->u);
	if (rv != 0) {
		kv_store_put(d->store, t);
		free(up);
		answer_kv_error(w, j, rv);
		return;
	}
	up->epoch = cluster_serving_epoch(d->cluster, j->req.tenant);
	up->chunk_size = cs;
	up->id = new_id(w);
	snprintf(up->tenant, sizeof(up->tenant), "%s", j->req.tenant);
	up->w = w;
	up->t = t;
	up->state = UP_OPEN;
	up->last_ms = now_ms();
	table_add(w, up);
	metrics_upload(+1, false);
	rpc_reply_init(&rp);
	rpc_blob_reply_begin(&rp, j->req.id, up->id, cs);
	answer(w, j, &rp);
}

static void run_append(struct worker *w, struct upload *up, struct job *j,
                       const struct rpc_blob_args *a)
{
	uint64_t size;
	int rv;

	if (up->state == UP_COMMITTED) {
		char msg[160];
		snprintf(msg, sizeof(msg),
		         "upload %016" PRIx64 " is committed (version %" PRIu64 ")", up->id,
		         up->version);
		answer_error(w, j, RPC_FAILED_PRECONDITION, msg);
		return;
	}
	size = kv_upload_size(up->u);
	if (a->offset <= size && a->len <= size - a->offset) {
		/* bytes it has (a resend): not applied again */
		answer_uint(w, j, WIRE_F_SIZE, size);
		return;
	}
	if (a->offset != size) {
		char msg[200];
		snprintf(msg, sizeof(msg),
		         "BlobAppend at offset %" PRIu64 ": the upload has %" PRIu64
		         " bytes, so the offset must be %" PRIu64,
		         a->offset, size, size);
		answer_error(w, j, RPC_FAILED_PRECONDITION, msg);
		return;
	}
	memset(&j->kreq, 0, sizeof(j->kreq));
	rv = kv_upload_prepare(up->u, a->data != NULL ? a->data : "", a->len, &j->kreq);
	if (rv != 0) {
		if (rv == -EBADFD)
			upload_free(w, up, true);
		answer_kv_error(w, j, rv);
		return;
	}
	if (j->kreq.n == 0) {
		/* no chunk complete yet: the bytes wait in the upload */
		answer_uint(w, j, WIRE_F_SIZE, kv_upload_size(up->u));
		return;
	}
	upload_submit(w, up, j);
}

static void run_commit(struct worker *w, struct upload *up, struct job *j,
                       const struct rpc_blob_args *a)
{
	struct kv_write_opts opts = a->opts;
	uint64_t size;
	int rv;

	if (up->state == UP_COMMITTED) {
		answer_uint(w, j, WIRE_F_VERSION, up->version); /* a resend */
		return;
	}
	size = kv_upload_size(up->u);
	if (a->size != size) {
		char msg[200];
		snprintf(msg, sizeof(msg),
		         "BlobCommit of %" PRIu64 " bytes: the upload has %" PRIu64 " bytes",
		         a->size, size);
		answer_error(w, j, RPC_FAILED_PRECONDITION, msg);
		return;
	}
	if (!a->has_ttl)
		opts.ttl_ms = kv_tenant_config_of(up->t)->default_ttl_ms;
	memset(&j->kreq, 0, sizeof(j->kreq));
	if ((rv = kv_upload_commit_prepare(up->u, &opts, &j->kreq)) != 0) {
		if (rv == -EBADFD)
			upload_free(w, up, true);
		answer_kv_error(w, j, rv);
		return;
	}
	upload_submit(w, up, j);
}

/* A request of an existing upload (or of none): runs it, or has it wait for
 * the upload's request in flight. */
static void upload_step(struct worker *w, struct job *j)
{
	struct kvd *d = worker_kvd(w);
	struct rpc_blob_args a;
	struct rpc_reply rp;
	struct upload *up;

	rpc_reply_init(&rp);
	if (rpc_blob_args(&j->req, &a, &rp) != 0) {
		answer(w, j, &rp);
		return;
	}
	rpc_reply_release(&rp);
	if (atomic_load(&d->quit)) {
		answer_error(w, j, RPC_UNAVAILABLE, "shutting down");
		return;
	}
	if (j->req.method != RPC_BLOB_ABORT && !cluster_may_write(d->cluster)) {
		answer_error(w, j, RPC_UNAVAILABLE,
		             "this node is fenced: its etcd lease is not confirmed");
		return;
	}
	if (j->req.method == RPC_BLOB_BEGIN) {
		run_begin(w, j, &a);
		return;
	}
	if ((up = upload_find(w, j->req.tenant, a.upload)) == NULL) {
		answer_error(w, j, RPC_NOT_FOUND, NO_SUCH_UPLOAD);
		return;
	}
	if (up->inflight == NULL && up->state == UP_OPEN &&
	    cluster_serving_epoch(d->cluster, up->tenant) != up->epoch) {
		abort_upload(w, up, "this node no longer serves the tenant under its epoch");
		answer_error(w, j, RPC_NOT_FOUND, NO_SUCH_UPLOAD);
		return;
	}
	if (up->inflight != NULL) {
		j->next = NULL;
		if (up->wait_tail != NULL)
			up->wait_tail->next = j;
		else
			up->wait_head = j;
		up->wait_tail = j;
		return;
	}
	up->last_ms = now_ms();
	switch (j->req.method) {
	case RPC_BLOB_APPEND:
		run_append(w, up, j, &a);
		break;
	case RPC_BLOB_COMMIT:
		run_commit(w, up, j, &a);
		break;
	case RPC_BLOB_ABORT:
		if (up->state == UP_COMMITTED) {
			char msg[160];
			snprintf(msg, sizeof(msg),
			         "upload %016" PRIx64 " is committed (version %" PRIu64 ")", up->id,
			         up->version);
			answer_error(w, j, RPC_FAILED_PRECONDITION, msg);
			break;
		}
		upload_free(w, up, false);
		answer_uint(w, j, NULL, 0);
		break;
	default:
		answer_error(w, j, RPC_INTERNAL, "request on the wrong path");
		break;
	}
}

void uploads_run(struct worker *w, struct job *j)
{
	j->dup_next = NULL;
	j->upload = NULL;
	if (j->req.has_client) {
		struct dedup *dd = worker_dedup(w);
		uint64_t now = now_ms();
		struct dedup_ent *e = dedup_find(dd, j->req.client, j->req.id, now);
		if (e != NULL && e->pending != NULL) {
			j->dup_next = e->pending->dup_next;
			e->pending->dup_next = j;
			return;
		}
		if (e != NULL && e->reply != NULL) {
			struct rpc_reply rp;
			rpc_reply_init(&rp);
			rpc_reply_bytes(&rp, e->reply, e->len);
			job_reply(j, &rp);
			return;
		}
		dedup_insert(dd, j->req.client, j->req.id, j, now);
	}
	upload_step(w, j);
}

/* ---- upkeep --------------------------------------------------------------- */

static void abort_upload(struct worker *w, struct upload *up, const char *why)
{
	klog(LOG_INFO, "tenant %s: upload %016" PRIx64 " aborted: %s", up->tenant, up->id, why);
	upload_free(w, up, true);
}

void uploads_tick(struct worker *w)
{
	struct uploads *ups = table(w);
	struct kvd *d = worker_kvd(w);
	uint64_t now;

	while (ups->ready != NULL) {
		struct job *q = ups->ready;
		ups->ready = NULL;
		ups->ready_tail = NULL;
		while (q != NULL) {
			struct job *next = q->next;
			upload_step(w, q);
			q = next;
		}
	}
	now = now_ms();
	if (ups->oldest == NULL || now - ups->last_tick_ms < UPLOAD_TICK_MS)
		return;
	ups->last_tick_ms = now;
	for (struct upload *up = ups->oldest, *next; up != NULL; up = next) {
		next = up->next;
		if (up->inflight != NULL)
			continue;
		if (up->state == UP_COMMITTED) {
			/* the oldest go first when too many are kept */
			if (now - up->last_ms >= UPLOAD_KEEP_MS || ups->kept > UPLOAD_KEPT_MAX)
				upload_free(w, up, false);
		} else if (now - up->last_ms >= d->cfg.upload_idle_ms) {
			abort_upload(w, up, "no request for upload_idle_ms");
		} else if (cluster_serving_epoch(d->cluster, up->tenant) != up->epoch) {
			abort_upload(w, up,
			             "this node no longer serves the tenant under its epoch");
		}
	}
}

void uploads_abort_tenant(struct worker *w, const char *tenant)
{
	for (struct upload *up = table(w)->oldest, *next; up != NULL; up = next) {
		next = up->next;
		if (strcmp(up->tenant, tenant) != 0 || up->inflight != NULL)
			continue;
		if (up->state == UP_OPEN)
			abort_upload(w, up, "its tenant is passivated, dropped or released");
		else
			upload_free(w, up, false);
	}
}

void uploads_close_all(struct worker *w)
{
	struct uploads *ups = table(w);
	uint32_t open = ups->open;

	if (open > 0)
		klog(LOG_INFO, "%u blob upload(s) aborted: kvd stops", open);
	while (ups->oldest != NULL) {
		struct upload *up = ups->oldest;
		up->inflight = NULL; /* (drained: none is) */
		upload_free(w, up, up->state == UP_OPEN);
	}
	while (ups->ready != NULL) {
		struct job *q = ups->ready;
		ups->ready = q->next;
		answer_error(w, q, RPC_UNAVAILABLE, "shutting down");
	}
	ups->ready_tail = NULL;
}
