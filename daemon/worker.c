/*
 * worker.c — shared-nothing workers. A tenant belongs to the worker its
 * name hashes to; that worker runs its reads, submits its writes, drives its
 * engine and keeps the de-duplication table of its writes and the blob
 * uploads of its tenants (upload.c: run from here, each turn and before a
 * tenant is passivated, dropped or released, and at the end).
 *
 * Loop of a worker:
 *   epoll_wait on: the queue's eventfd, and the engine event fd of every
 *   tenant with writes in flight ("busy" tenants), at most until the first
 *   deadline of a request parked for its tenant's activation;
 *   take every queued job: a request of a tenant that is not active is
 *   parked while an activator activates it (activate.c), reads run now,
 *   writes are kv_submit()ted; an activation's end runs its parked requests;
 *   kv_process() every busy tenant: queued writes go out as one batch per
 *   tenant (group commit), finished batches complete their requests, whose
 *   callbacks send the replies.
 *
 * Invariants:
 *   1. A busy tenant holds one store reference, so it is not passivated
 *      while writes are in flight; it leaves the busy list (and epoll) once
 *      none have been in flight for BUSY_LINGER_MS (at most BUSY_LINGER_MAX
 *      idle ones linger so) and maintenance is not attached. (Staying
 *      registered for good would pin idle tenants against the open-file
 *      budget's passivation; leaving at once cost an epoll_ctl pair per
 *      write.)
 *   2. A write with a client id is applied at most once per (client, id)
 *      while the worker's de-duplication table (dedup.c) remembers it: a
 *      repeat while the first is in flight waits for its reply, a repeat
 *      after it gets a copy of that reply.
 *   3. After job_reply() a job is not touched again: its transport may
 *      already have reused or freed it.
 *   4. A busy entry that leaves the list is freed only between two turns
 *      of the loop (busy_reap): the events of the turn's epoll_wait may
 *      still name it, and a turn drives the busy list (and runs stream
 *      requests, tenant operations among them) between those events.
 */
#include "kvd.h"

#include "activate.h"
#include "cluster.h"
#include "dedup.h"
#include "log.h"
#include "upload.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define BUSY_LINGER_MS     1000u  /* drive_busy */
#define TENANT_OP_WAIT_MS  60000u /* a TenantDrop/Passivate waits this long for a merge */
#define WRITE_EVERY_EVENTS 8      /* watched events between two drive_busy in a turn */
#define BUSY_LINGER_MAX    4u     /* idle tenants kept so, at most (each pins its files) */

struct busy {
	struct watch watch; /* first: its engine's event fd only wakes the loop */
	kv_tenant *t;
	kv_db *db;
	int fd;
	uint32_t inflight;
	uint32_t attached;
	uint64_t idle_since_ms; /* nothing in flight since then; 0: something is */
	bool io_failed;         /* a write of it failed with EIO (logged) */
	struct busy *next;
};

struct worker {
	struct kvd *d;
	uint32_t id;
	pthread_t th;
	_Atomic uint64_t beat; /* now_ms() of the last turn of the loop */
	pthread_mutex_t mu;
	struct job *q_head, *q_tail;
	uint32_t qlen;
	int qfd;
	int epfd;
	struct busy *busy;
	struct busy *retired; /* out of the list and epoll; freed next turn (4) */
	struct dedup dd;     /* writes with a client id (invariant 2) */
	struct job *waiting; /* tenant operations waiting for a merge to end */
	struct uploads ups;  /* blob uploads of its tenants (upload.c) */
	struct acts acts;    /* requests waiting for their tenant's activation (activate.c) */
};

uint32_t worker_of(const struct kvd *d, const char *tenant)
{
	return (uint32_t)(XXH3_64bits(tenant, strlen(tenant)) % d->nworkers);
}

uint64_t workers_oldest_beat(struct kvd *d)
{
	uint64_t oldest = UINT64_MAX;

	for (uint32_t i = 0; i < d->nstarted; i++) {
		uint64_t b = atomic_load(&d->workers[i].beat);
		if (b < oldest)
			oldest = b;
	}
	return oldest;
}

bool worker_post(struct kvd *d, uint32_t wi, struct job *j)
{
	struct worker *w = &d->workers[wi];
	uint64_t one = 1;
	bool wake;

	pthread_mutex_lock(&w->mu);
	if (j->kind == JOB_REQUEST && w->qlen >= d->cfg.max_queue) {
		pthread_mutex_unlock(&w->mu);
		return false;
	}
	j->next = NULL;
	if (w->q_tail)
		w->q_tail->next = j;
	else
		w->q_head = j;
	w->q_tail = j;
	wake = w->qlen++ == 0;
	pthread_mutex_unlock(&w->mu);
	if (wake && write(w->qfd, &one, sizeof(one)) < 0)
		klog(LOG_ERR, "worker %u: cannot wake: %m", wi);
	return true;
}

uint32_t worker_id(const struct worker *w)
{
	return w->id;
}

struct kvd *worker_kvd(struct worker *w)
{
	return w->d;
}

struct dedup *worker_dedup(struct worker *w)
{
	return &w->dd;
}

struct uploads *worker_uploads(struct worker *w)
{
	return &w->ups;
}

struct acts *worker_acts(struct worker *w)
{
	return &w->acts;
}

int worker_watch(struct kvd *d, uint32_t wi, int op, int fd, uint32_t events, void *tag)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = tag;
	return epoll_ctl(d->workers[wi].epfd, op, fd, op == EPOLL_CTL_DEL ? NULL : &ev) == 0
	               ? 0
	               : -errno;
}

/* ---- de-duplication of writes ------------------------------------------- */

static void reply_bytes(struct job *j, const uint8_t *p, size_t len)
{
	struct rpc_reply rp;

	rpc_reply_init(&rp);
	rpc_reply_bytes(&rp, p, len);
	job_reply(j, &rp);
}

/* ---- busy tenants ------------------------------------------------------- */

static struct busy *busy_find(struct worker *w, kv_tenant *t)
{
	struct busy *b;

	for (b = w->busy; b != NULL; b = b->next)
		if (b->t == t)
			return b;
	return NULL;
}

static struct busy *busy_get(struct worker *w, kv_tenant *t)
{
	struct busy *b = busy_find(w, t);
	struct epoll_event ev;
	kv_tenant *ref;

	if (b != NULL)
		return b;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	if (kv_store_get_active(w->d->store, kv_tenant_name(t), &ref) != 0 || ref != t) {
		free(b);
		return NULL;
	}
	b->t = t;
	b->db = kv_tenant_db(t);
	b->fd = kv_event_fd(b->db);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = b;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, b->fd, &ev) != 0) {
		klog(LOG_ERR, "worker %u: epoll_ctl: %m", w->id);
		kv_store_put_unused(w->d->store, t);
		free(b);
		return NULL;
	}
	b->next = w->busy;
	w->busy = b;
	return b;
}

/* Drives every busy tenant once; drops the ones that have had nothing in
 * flight for BUSY_LINGER_MS (kept that long, a tenant written to again and
 * again is not taken out of and put back into the epoll set per write), and
 * all idle ones but the BUSY_LINGER_MAX newest; with `now_for` set, that
 * one at once if it has nothing in flight. */
static void drive_busy_now(struct worker *w, struct busy *now_for)
{
	struct busy **pp = &w->busy, *b;
	uint64_t now = now_ms();
	uint32_t lingering = 0;

	while ((b = *pp) != NULL) {
		kv_process(b->db);
		if (b->inflight > 0 || b->attached > 0)
			b->idle_since_ms = 0;
		else if (b->idle_since_ms == 0)
			b->idle_since_ms = now;
		if (b->inflight == 0 && b->attached == 0 &&
		    (now - b->idle_since_ms >= BUSY_LINGER_MS || b == now_for ||
		     lingering++ >= BUSY_LINGER_MAX || atomic_load(&w->d->quit))) {
			*pp = b->next;
			epoll_ctl(w->epfd, EPOLL_CTL_DEL, b->fd, NULL);
			kv_store_put_unused(w->d->store, b->t);
			b->next = w->retired;
			w->retired = b;
			continue;
		}
		pp = &b->next;
	}
}

static void drive_busy(struct worker *w)
{
	drive_busy_now(w, NULL);
}

struct busy *worker_busy(struct worker *w, kv_tenant *t)
{
	return busy_get(w, t);
}

void worker_busy_inflight(struct busy *b, int delta)
{
	b->inflight = (uint32_t)((int64_t)b->inflight + delta);
}

/* Frees the entries that left the busy list (invariant 4): between turns. */
static void busy_reap(struct worker *w)
{
	while (w->retired != NULL) {
		struct busy *b = w->retired;
		w->retired = b->next;
		free(b);
	}
}

/* Runs the loop for one tenant until its writes are answered. */
static void drain_tenant(struct worker *w, struct busy *b)
{
	while (b->inflight > 0) {
		struct epoll_event ev;
		epoll_wait(w->epfd, &ev, 1, 100);
		kv_process(b->db);
	}
}

/* ---- jobs --------------------------------------------------------------- */

static void reply_tenant_error(struct kvd *d, struct job *j, int rv)
{
	const struct rpc_req *r = &j->req;
	char msg[512];

	rpc_tenant_message(d->store, r->tenant, rv, msg, sizeof(msg));
	job_reply_error(j, r->id, rpc_status_of(rv), msg);
}

static void write_done(struct kv_req *kreq, int status)
{
	struct job *j = kreq->arg, *dup = j->dup_next;
	struct busy *b = j->busy;
	kv_tenant *t = j->t;
	struct kvd *d = j->d;
	struct worker *w = &d->workers[worker_of(d, j->req.tenant)];
	struct rpc_reply rp;

	rpc_reply_init(&rp);
	rpc_write_reply(&j->req, status, j->ops, j->nops, &rp);
	if (status == -EIO && !cluster_serves(d->cluster, j->req.tenant)) {
		/* a shared device refuses the writes of a tenant this node gave
		 * up (fenced, released) while the write was on its way */
		char msg[256];
		snprintf(msg, sizeof(msg),
		         "tenant '%s' was given up by this node while the write was on its way: "
		         "the shared device refused it",
		         j->req.tenant);
		rpc_reply_error(&rp, j->req.id, RPC_UNAVAILABLE, msg);
		if (!b->io_failed)
			klog(LOG_NOTICE, "%s", msg);
		b->io_failed = true;
	}
	/* whole before it is remembered and copied to the repeats */
	rpc_reply_finish(&rp, j->req.id);
	if (status == -EIO && !b->io_failed) {
		/* the engine turned the tenant read-only (a write or an fdatasync
		 * of its log failed): said once per busy spell */
		b->io_failed = true;
		klog(LOG_ERR,
		     "tenant %s: a write or fdatasync of its log failed (I/O error); it refuses "
		     "writes until it is reopened (TenantPassivate and TenantActivate, or a "
		     "restart) once the disk is dealt with",
		     j->req.tenant);
	}
	if (j->req.has_client) {
		uint64_t now = now_ms();
		struct dedup_ent *e = dedup_find(&w->dd, j->req.client, j->req.id, now);
		if (e != NULL && e->pending == j)
			dedup_answered(&w->dd, e, rp.buf.data, rp.buf.size, now);
	}
	while (dup != NULL) {
		/* repeats of this request (a resend): the same answer */
		struct job *next = dup->dup_next;
		reply_bytes(dup, (const uint8_t *)rp.buf.data, rp.buf.size);
		dup = next;
	}
	free(j->ops);
	j->ops = NULL;
	b->inflight--;
	kv_store_put(d->store, t);
	job_reply(j, &rp); /* j may be reused from here on */
}

/* t: a reference on the request's tenant (acts_gate), taken over */
static void run_write(struct worker *w, struct job *j, kv_tenant *t)
{
	struct kvd *d = w->d;
	struct rpc_reply rp;
	int rv;

	if (j->req.has_client) {
		struct dedup_ent *e = dedup_find(&w->dd, j->req.client, j->req.id, now_ms());
		if (e != NULL && e->pending != NULL) {
			j->dup_next = e->pending->dup_next;
			e->pending->dup_next = j;
			klog(LOG_DEBUG, "write %llu of client %016llx repeated while in flight",
			     (unsigned long long)j->req.id, (unsigned long long)j->req.client);
			kv_store_put(d->store, t);
			return;
		}
		if (e != NULL && e->reply != NULL) {
			klog(LOG_DEBUG, "write %llu of client %016llx repeated: answered again",
			     (unsigned long long)j->req.id, (unsigned long long)j->req.client);
			kv_store_put(d->store, t);
			reply_bytes(j, e->reply, e->len);
			return;
		}
	}
	if (!cluster_may_write(d->cluster)) { /* cluster.c, invariant 2 */
		kv_store_put(d->store, t);
		job_reply_error(j, j->req.id, RPC_UNAVAILABLE,
		                "this node is fenced: its etcd lease is not confirmed");
		return;
	}
	rpc_reply_init(&rp);
	if (rpc_write_prepare(&j->req, kv_tenant_config_of(t), &d->lim, &j->ops, &j->nops, &rp) !=
	    0) {
		kv_store_put(d->store, t);
		job_reply(j, &rp);
		return;
	}
	rpc_reply_release(&rp);
	j->t = t;
	if ((j->busy = busy_get(w, t)) == NULL) {
		free(j->ops);
		kv_store_put(d->store, t);
		job_reply_error(j, j->req.id, RPC_INTERNAL, "cannot watch the tenant's log");
		return;
	}
#ifdef KVD_TEST_HOOKS
	/* KVD_TEST_WRITE_DELAY_MS (main.c): past the fencing check, before the
	 * engine; a node fenced meanwhile must not get it onto the device */
	if (d->write_delay_ms && j->nops > 0 && j->ops[0].key_len >= 14 &&
	    memcmp(j->ops[0].key, "kvd-test-delay", 14) == 0) {
		klog(LOG_NOTICE, "test mode: a write of tenant %s held %u ms", j->req.tenant,
		     d->write_delay_ms);
		poll(NULL, 0, (int)d->write_delay_ms);
	}
#endif
	memset(&j->kreq, 0, sizeof(j->kreq));
	j->kreq.ops = j->ops;
	j->kreq.n = j->nops;
	j->kreq.done = write_done;
	j->kreq.arg = j;
	j->dup_next = NULL;
	if ((rv = kv_submit(kv_tenant_db(t), &j->kreq)) != 0) {
		struct rpc_reply er;
		rpc_reply_init(&er);
		rpc_write_reply(&j->req, rv, j->ops, j->nops, &er);
		free(j->ops);
		kv_store_put(d->store, t);
		job_reply(j, &er);
		return;
	}
	j->busy->inflight++;
	if (j->req.has_client)
		dedup_insert(&w->dd, j->req.client, j->req.id, j, now_ms());
}

/* t: as run_write's */
static void run_read(struct worker *w, struct job *j, kv_tenant *t)
{
	struct kvd *d = w->d;
	struct rpc_reply rp;

	rpc_reply_init(&rp);
	rpc_run_read(d->store, t, &j->req, &rp);
	kv_store_put(d->store, t);
	if (rp.status == RPC_DATA_LOSS)
		klog(LOG_ERR, "tenant %s: a %s read a damaged record (DATA_LOSS)", j->req.tenant,
		     rpc_method_name(j->req.method));
	job_reply(j, &rp);
}

static void run_tenant_op(struct worker *w, struct job *j)
{
	struct kvd *d = w->d;
	struct rpc_reply rp;
	kv_tenant *t;
	struct busy *b = NULL;

	/* this worker's own writes to the tenant go out first */
	if (kv_store_get_active(d->store, j->req.tenant, &t) == 0) {
		b = busy_find(w, t);
		kv_store_put_unused(d->store, t);
	}
	if (b != NULL) {
		if (b->attached > 0) {
			/* a merge or Compact drives the tenant: this waits for it,
			 * retried each turn of the loop (within the deadline) */
			if (j->deadline_ms == 0)
				j->deadline_ms = now_ms() + TENANT_OP_WAIT_MS;
			j->next = w->waiting;
			w->waiting = j;
			return;
		}
		drain_tenant(w, b);
	}
	/* its uploads end before its database closes (upload.c, invariant 1) */
	if (j->req.method != RPC_TENANT_ACTIVATE)
		uploads_abort_tenant(w, j->req.tenant);
	if (b != NULL)
		drive_busy_now(w, b); /* lets go of the tenant */
	rpc_reply_init(&rp);
	rpc_run_tenant(d->store, &j->req, &rp);
	cluster_tenant_done(d, &j->req, &rp); /* TenantRelease, TenantDrop: the owner key */
	job_reply(j, &rp);
}

static void run_attach(struct worker *w, struct job *j)
{
	kv_tenant *t;

	if (kv_store_get_active(w->d->store, j->tenant, &t) == 0) {
		struct busy *b = j->kind == JOB_ATTACH ? busy_get(w, t) : busy_find(w, t);
		if (b != NULL) {
			if (j->kind == JOB_ATTACH)
				b->attached++;
			else if (b->attached > 0)
				b->attached--;
		}
		kv_store_put_unused(w->d->store, t);
	}
	sem_post(j->done);
}

/* Requests that need their tenant active: reads, writes, blobs, and
 * TenantActivate of a tenant that exists (of one that does not, it says so
 * without creating it). */
static bool needs_active(struct worker *w, const struct job *j)
{
	kv_tenant *t;
	int rv;

	switch (j->req.kind) {
	case RPC_KIND_WRITE:
	case RPC_KIND_READ:
	case RPC_KIND_BLOB:
		return true;
	default:
		break;
	}
	if (j->req.method != RPC_TENANT_ACTIVATE)
		return false;
	rv = kv_store_get_active(w->d->store, j->req.tenant, &t);
	if (rv == 0)
		kv_store_put_unused(w->d->store, t);
	return rv == -EAGAIN;
}

void worker_run(struct worker *w, struct job *j)
{
	kv_tenant *t = NULL;
	int rv;

	if (j->kind == JOB_ACTIVATED) {
		acts_done(w, j);
		return;
	}
	if (j->kind != JOB_REQUEST) {
		run_attach(w, j);
		return;
	}
	if (w->d->job_delay_ms)
		poll(NULL, 0, (int)w->d->job_delay_ms);
	if (j->deadline_ms && now_ms() > j->deadline_ms) {
		cluster_release_undo(w->d, &j->req);
		job_reply_error(j, j->req.id, RPC_DEADLINE_EXCEEDED,
		                "deadline passed before the request ran; nothing was done");
		return;
	}
	/* a tenant that is not active is activated off the worker, and the
	 * request parked until it is (activate.c) */
	if (needs_active(w, j)) {
		if ((rv = acts_gate(w, j, &t)) == 1)
			return;
		if (rv != 0) {
			reply_tenant_error(w->d, j, rv);
			return;
		}
	}
	switch (j->req.kind) {
	case RPC_KIND_WRITE:
		run_write(w, j, t);
		break;
	case RPC_KIND_READ:
		run_read(w, j, t);
		break;
	case RPC_KIND_TENANT:
		kv_store_put(w->d->store, t);
		run_tenant_op(w, j);
		break;
	case RPC_KIND_BLOB:
		kv_store_put(w->d->store, t);
		uploads_run(w, j);
		break;
	default:
		job_reply_error(j, j->req.id, RPC_INTERNAL, "request on the wrong thread");
		break;
	}
}

/* How long a turn waits for events: half a second, or until the first
 * deadline of a request waiting for its tenant's activation. */
static int loop_timeout(struct worker *w, uint64_t now)
{
	uint64_t first = acts_next_deadline(w);

	if (first == 0 || first >= now + 500)
		return 500;
	return first > now ? (int)(first - now) + 1 : 1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[64];
	uint64_t last_expire = now_ms();

	while (!atomic_load(&w->d->quit)) {
		struct job *q;
		uint64_t v, now = now_ms();
		int n;
		atomic_store(&w->beat, now);
		bool queued = false;
		busy_reap(w);
		n = epoll_wait(w->epfd, evs, 64, loop_timeout(w, now));
		for (int i = 0; i < n; i++) {
			struct watch *wt = evs[i].data.ptr;
			if (wt == NULL)
				queued = true;
			else if (wt->on_event != NULL)
				wt->on_event(w, wt, evs[i].events);
			/* writes read so far go out now and then, not only at the
			 * end of a long turn: a batch per WRITE_EVERY_EVENTS */
			if (i % WRITE_EVERY_EVENTS == WRITE_EVERY_EVENTS - 1 && i + 1 < n)
				drive_busy(w);
		}
		/* the queue is taken every turn; its eventfd is reset when it
		 * fired (posters write it only when the queue was empty) */
		if (queued && read(w->qfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			klog(LOG_ERR, "worker %u: queue: %m", w->id);
		pthread_mutex_lock(&w->mu);
		q = w->q_head;
		w->q_head = w->q_tail = NULL;
		w->qlen = 0;
		pthread_mutex_unlock(&w->mu);
		while (q != NULL) {
			struct job *next = q->next;
			worker_run(w, q);
			q = next;
		}
		drive_busy(w);
		uploads_tick(w);
		acts_expire(w, now_ms());
		if (w->waiting != NULL) {
			/* again; each goes back to the list if the merge still runs,
			 * or is answered (DEADLINE_EXCEEDED once its time is up) */
			struct job *wq = w->waiting;
			w->waiting = NULL;
			while (wq != NULL) {
				struct job *next = wq->next;
				if (atomic_load(&w->d->stopping))
					job_reply_error(
					        wq, wq->req.id, RPC_UNAVAILABLE,
					        "shutting down; the tenant was left as it was");
				else
					worker_run(w, wq);
				wq = next;
			}
		}
		/* frees what the table no longer remembers (lookups already
		 * ignore it); the time now, not the turn's start: writes
		 * remembered during the turn are younger than that */
		now = now_ms();
		if (now - last_expire > 1000) {
			dedup_expire(&w->dd, now);
			last_expire = now;
		}
	}
	/* answer what is still in flight before leaving; then the uploads
	 * end, before the store closes (upload.c, invariant 1) */
	while (w->busy != NULL) {
		struct epoll_event ev;
		epoll_wait(w->epfd, &ev, 1, 100);
		drive_busy(w);
	}
	uploads_close_all(w);
	acts_close_all(w);
	busy_reap(w);
	return NULL;
}

int workers_start(struct kvd *d)
{
	uint32_t i;

	if ((d->workers = calloc(d->nworkers, sizeof(*d->workers))) == NULL)
		return -ENOMEM;
	for (i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		w->d = d;
		w->id = i;
		w->qfd = w->epfd = -1;
		pthread_mutex_init(&w->mu, NULL);
	}
	for (i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		struct epoll_event ev;
		if (dedup_init(&w->dd, DEDUP_CAP, DEDUP_TTL_MS) != 0)
			return -ENOMEM;
		w->qfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (w->qfd < 0 || w->epfd < 0)
			return -errno;
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.ptr = NULL;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->qfd, &ev) != 0)
			return -errno;
		if (pthread_create(&w->th, NULL, worker_main, w) != 0)
			return -EAGAIN;
		d->nstarted = i + 1;
	}
	return 0;
}

void workers_stop(struct kvd *d)
{
	uint32_t i;
	uint64_t one = 1;

	if (d->workers == NULL)
		return;
	atomic_store(&d->quit, true);
	for (i = 0; i < d->nstarted; i++)
		if (write(d->workers[i].qfd, &one, sizeof(one)) < 0)
			klog(LOG_ERR, "worker %u: cannot wake: %m", i);
	for (i = 0; i < d->nworkers; i++) {
		struct worker *w = &d->workers[i];
		if (i < d->nstarted)
			pthread_join(w->th, NULL);
		dedup_release(&w->dd);
		if (w->qfd >= 0)
			close(w->qfd);
		if (w->epfd >= 0)
			close(w->epfd);
		pthread_mutex_destroy(&w->mu);
	}
	free(d->workers);
	d->workers = NULL;
}
