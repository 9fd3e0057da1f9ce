/*
 * request.c — what every transport does with a request once its bytes have
 * arrived: decode the envelope, check its token or its connection's client
 * certificate (auth.c: UNAUTHENTICATED, PERMISSION_DENIED), in cluster mode
 * make sure this node serves its tenant (cluster.c: MOVED, UNAVAILABLE when
 * fenced; TenantAdopt), then answer at
 * once (errors, Health, tenant bookkeeping), queue it on the maintenance
 * thread (Compact), or run it on the worker that owns its tenant — at once
 * when the calling thread is that worker, else through the worker's queue.
 *
 * The transport fills in j->d, j->reply, j->conn_of and j->sink (and j->msg
 * or j->body, which the decoded request points into) before
 * request_dispatch; whoever
 * answers calls job_reply exactly once, after which the job belongs to the
 * transport again.
 *
 * Threads: request_dispatch runs on the transport's thread (an nng callback,
 * or the worker that read a stream connection).
 */
#include "kvd.h"

#include "cluster.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

/* The token check: true when the request may go on (with its table held in
 * *ret_table, for TenantList's filter), else answered. */
static bool request_allowed(struct kvd *d, struct job *j, struct auth_table **ret_table)
{
	struct auth_table *t = auth_acquire(&d->auth);
	const struct auth_entry *e;
	char msg[256], peer[128], src[AUTH_SRC_MAX];
	uint64_t conn = 0, left;
	int status;

	if (t != NULL && j->conn_of != NULL && auth_any_blocked(&d->auth, now_ms())) {
		/* a source that guessed too often is refused before any check */
		conn = j->conn_of(j, peer, sizeof(peer));
		auth_source(peer, src, sizeof(src));
		if ((left = auth_blocked(&d->auth, src, now_ms())) > 0) {
			auth_release(t);
			snprintf(msg, sizeof(msg),
			         "too many unknown tokens from %s: refused for %llu s more", src,
			         (unsigned long long)(left + 999) / 1000);
			if (j->msg == NULL)
				j->end_conn = true;
			job_reply_error(j, j->req.id, RPC_UNAUTHENTICATED, msg);
			return false;
		}
	}
	status = auth_check_peer(t, &j->req, j->peer_cert, &e, msg, sizeof(msg));
	if (status == RPC_OK) {
		j->req.may_see = t != NULL ? auth_may_see : NULL;
		j->req.grant = e;
		*ret_table = t;
		return true;
	}
	auth_release(t);
	/* Only a stream connection is ended: closing an nng pipe from here (an
	 * nng callback, its REP context about to send the reply on it) could
	 * leave that context's send unfinished and kvd's nng_close waiting for
	 * it at shutdown; and an nng client dials again by itself, so it would
	 * gain little. nng connections are counted and logged. */
	if (status == RPC_UNAUTHENTICATED && j->req.token != NULL && j->conn_of != NULL &&
	    (conn != 0 || (conn = j->conn_of(j, peer, sizeof(peer))) != 0) &&
	    auth_failed(&d->auth, conn, j->msg == NULL, peer, now_ms()) && j->msg == NULL) {
		snprintf(msg, sizeof(msg), "unknown token, %u times: connection ended",
		         AUTH_FAILS_MAX);
		j->end_conn = true; /* the stream transport ends it after the reply */
	} else if (status == RPC_PERMISSION_DENIED) {
		klog(LOG_DEBUG, "denied: %s", msg);
	}
	job_reply_error(j, j->req.id, status, msg);
	return false;
}

int request_dispatch(struct kvd *d, struct job *j, const void *body, size_t len,
                     struct worker *self)
{
	const char *emsg = NULL;
	struct auth_table *t = NULL;
	uint32_t owner;
	int status;

	atomic_fetch_add(&d->requests, 1);
	atomic_fetch_add(&d->in_flight, 1);
	j->kind = JOB_REQUEST;
	j->live = true;
	j->mmethod = RPC_METHODS;
	metrics_request(j, len);
	if (rpc_req_decode(&j->req, &d->lim, body, len, &status, &emsg) != 0) {
		klog(LOG_DEBUG, "rejected request: %s", emsg);
		job_reply_error(j, j->req.id, status, emsg);
		return -1;
	}
	j->mmethod = j->req.method;
	if (atomic_load(&d->stopping) && j->req.method != RPC_HEALTH) {
		job_reply_error(j, j->req.id, RPC_UNAVAILABLE, "shutting down");
		return -1;
	}
	if (!request_allowed(d, j, &t))
		return -1;
	if (j->req.timeout_ms)
		j->deadline_ms = now_ms() + j->req.timeout_ms;
	/* cluster mode: the tenant is served here, or the answer says where */
	if ((d->cluster != NULL || j->req.method == RPC_TENANT_RELEASE ||
	     j->req.method == RPC_TENANT_ADOPT) &&
	    cluster_gate(d, j)) {
		auth_release(t);
		return -1;
	}
	switch (j->req.kind) {
	case RPC_KIND_LOCAL: {
		struct rpc_reply rp;
		rpc_reply_init(&rp);
		rpc_run_local(d->store, &d->lim, &j->req, (now_ms() - d->start_ms) / 1000,
		              atomic_load(&d->requests), atomic_load(&d->in_flight), d->nworkers,
		              atomic_load(&d->stopping), &rp);
		auth_release(t); /* j->req.grant points into it */
		job_reply(j, &rp);
		return -1;
	}
	case RPC_KIND_MAINT:
		auth_release(t);
		j->req.may_see = NULL, j->req.grant = NULL; /* not held past here */
		maint_post(d, j);
		return -1;
	default:
		auth_release(t);
		j->req.may_see = NULL, j->req.grant = NULL; /* not held past here */
		owner = worker_of(d, j->req.tenant);
		if (self != NULL && worker_id(self) == owner) {
			worker_run(self, j);
			return (int)owner;
		}
		if (!worker_post(d, owner, j)) {
			cluster_release_undo(d, &j->req);
			job_reply_error(j, j->req.id, RPC_RESOURCE_EXHAUSTED,
			                "too many requests queued, try again");
		}
		return (int)owner;
	}
}
