/*
 * maint.c — the maintenance thread: every 100 ms it ticks the active tenants
 * (interval syncs, hint files of sealed segments, auto-merge), every second
 * it passivates idle tenants and keeps key directories within the memory
 * budget, and it runs merges and Compact requests. It also sends systemd
 * STATUS= (WATCHDOG=1 comes from the main thread, which a long merge never
 * holds up).
 *
 * A merge drives barriers through the tenant's write path, which the owning
 * worker runs; so before merging, the thread asks the owner to watch the
 * tenant (JOB_ATTACH) and lets go after (JOB_DETACH).
 *
 * Failing automatic merges back off, per tenant (a full disk, a read-only
 * tenant would otherwise fail a merge at every tick):
 *   1. After a failure the tenant's next automatic merge waits
 *      RETRY_FIRST_MS, twice as long after each further failure of the
 *      streak, at most RETRY_MAX_MS; a success ends the streak.
 *   2. The first failure of a streak is logged (LOG_ERR) with the error and
 *      the wait; further ones with the same error at most once every
 *      RETRY_LOG_MS, saying how many failed since the last line; one with
 *      another error at once. The success that ends a streak is logged at
 *      LOG_NOTICE with the number of failures.
 *   3. Compact requests (run_compact) are never held back; every attempt is
 *      counted (metrics_merge) and the tenants in a streak are a gauge
 *      (metrics_merge_backoff).
 *   4. d->retry, sorted by tenant name, has an entry per tenant in a streak
 *      and nothing else: the entry goes when the streak ends, when the tenant
 *      no longer asks for a merge (a Compact did it), is passivated or is
 *      dropped, so there are never more entries than active tenants.
 * The table is the maintenance thread's alone: no lock.
 */
#include "kvd.h"

#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#define RETRY_FIRST_MS 1000u
#define RETRY_MAX_MS   (5u * 60 * 1000)
#define RETRY_LOG_MS   (60u * 1000) /* same error of a streak: a line at most this often */

/* A tenant whose automatic merges fail (see the top of this file). */
struct merge_retry {
	char tenant[KV_TENANT_NAME_MAX + 1];
	uint32_t failures;  /* in a row */
	uint32_t unlogged;  /* failures since the last line logged */
	int err;            /* the last one's */
	uint32_t wait_ms;   /* after the last failure */
	uint64_t next_ms;   /* no automatic merge before (now_ms) */
	uint64_t logged_ms; /* the last line logged */
	uint64_t seen;      /* the last tick_tenants pass that found it active */
};

static void owner_watch(struct kvd *d, const char *tenant, enum job_kind kind)
{
	struct job j;
	sem_t done;

	memset(&j, 0, sizeof(j));
	sem_init(&done, 0, 0);
	j.kind = kind;
	j.done = &done;
	snprintf(j.tenant, sizeof(j.tenant), "%s", tenant);
	worker_post(d, worker_of(d, tenant), &j); /* never refused: not a request */
	while (sem_wait(&done) != 0)
		;
	sem_destroy(&done);
}

static int retry_cmp(const void *key, const void *e)
{
	return strcmp(key, ((const struct merge_retry *)e)->tenant);
}

static struct merge_retry *retry_find(struct kvd *d, const char *tenant)
{
	if (d->nretry == 0)
		return NULL; /* (bsearch must not be given a NULL array) */
	return bsearch(tenant, d->retry, d->nretry, sizeof(*d->retry), retry_cmp);
}

/* A new entry for tenant (none yet), in name order; NULL without memory. */
static struct merge_retry *retry_add(struct kvd *d, const char *tenant)
{
	size_t at = 0;

	if (d->nretry == d->capretry) {
		size_t cap = d->capretry ? d->capretry * 2 : 8;
		struct merge_retry *nv = realloc(d->retry, cap * sizeof(*nv));
		if (nv == NULL)
			return NULL;
		d->retry = nv;
		d->capretry = cap;
	}
	while (at < d->nretry && strcmp(d->retry[at].tenant, tenant) < 0)
		at++;
	memmove(&d->retry[at + 1], &d->retry[at], (d->nretry - at) * sizeof(*d->retry));
	d->nretry++;
	memset(&d->retry[at], 0, sizeof(d->retry[at]));
	snprintf(d->retry[at].tenant, sizeof(d->retry[at].tenant), "%s", tenant);
	d->retry[at].seen = d->tick_pass; /* (added while tick_tenants meets it) */
	return &d->retry[at];
}

static void retry_remove(struct kvd *d, struct merge_retry *e)
{
	size_t at = (size_t)(e - d->retry);

	memmove(e, e + 1, (d->nretry - at - 1) * sizeof(*e));
	d->nretry--;
	metrics_merge_backoff((uint32_t)d->nretry);
}

/* Whether the tenant's automatic merge waits (rule 1). */
static bool retry_holds(struct kvd *d, const char *tenant, uint64_t now)
{
	struct merge_retry *e = retry_find(d, tenant);

	return e != NULL && now < e->next_ms;
}

/* A failed automatic merge: the streak goes on (or starts) and is logged
 * (rules 1 and 2). Without memory for an entry the merge is retried at the
 * next tick, and logged each time, as if there were no backoff. */
static void retry_failed(struct kvd *d, const char *tenant, int err, uint64_t now)
{
	struct merge_retry *e = retry_find(d, tenant);
	char was[128];

	if (e == NULL && (e = retry_add(d, tenant)) == NULL) {
		klog(LOG_ERR, "tenant %s: merge failed: %s", tenant, kv_strerror(err));
		return;
	}
	e->failures++;
	e->wait_ms = e->failures == 1                 ? RETRY_FIRST_MS
	             : e->wait_ms >= RETRY_MAX_MS / 2 ? RETRY_MAX_MS
	                                              : e->wait_ms * 2;
	e->next_ms = now + e->wait_ms;
	if (e->failures == 1) {
		klog(LOG_ERR, "tenant %s: merge failed: %s; next attempt in %u s", tenant,
		     kv_strerror(err), e->wait_ms / 1000);
		metrics_merge_backoff((uint32_t)d->nretry);
	} else if (err != e->err) {
		snprintf(was, sizeof(was), "%s", kv_strerror(e->err));
		klog(LOG_ERR,
		     "tenant %s: merge failed: %s (before: %s), %u failures in a row; next "
		     "attempt in %u s",
		     tenant, kv_strerror(err), was, e->failures, e->wait_ms / 1000);
	} else if (now - e->logged_ms >= RETRY_LOG_MS) {
		klog(LOG_ERR,
		     "tenant %s: merge failed: %s, %u failures since the last report, %u in a "
		     "row; next attempt in %u s",
		     tenant, kv_strerror(err), e->unlogged + 1, e->failures, e->wait_ms / 1000);
	} else {
		e->unlogged++;
		e->err = err;
		return;
	}
	e->err = err;
	e->unlogged = 0;
	e->logged_ms = now;
}

static int merge_tenant(struct kvd *d, kv_tenant *t)
{
	const char *name = kv_tenant_name(t);
	uint64_t t0 = now_ms();
	struct kv_stats before, after;
	struct merge_retry *e;
	int rv;

	kv_stats(kv_tenant_db(t), &before);
	owner_watch(d, name, JOB_ATTACH);
	rv = kv_merge(kv_tenant_db(t));
	owner_watch(d, name, JOB_DETACH);
	kv_stats(kv_tenant_db(t), &after);
	metrics_merge(now_ms() - t0, rv == 0);
	if (rv != 0) {
		retry_failed(d, name, rv, now_ms());
		return rv;
	}
	if ((e = retry_find(d, name)) != NULL) {
		klog(LOG_NOTICE,
		     "tenant %s: merge succeeded after %u failures: merged in %" PRIu64
		     " ms, %" PRIu64 " -> %" PRIu64 " bytes",
		     name, e->failures, now_ms() - t0, before.disk_bytes, after.disk_bytes);
		retry_remove(d, e);
	} else
		klog(LOG_INFO,
		     "tenant %s: merged in %" PRIu64 " ms, %" PRIu64 " -> %" PRIu64 " bytes", name,
		     now_ms() - t0, before.disk_bytes, after.disk_bytes);
	return 0;
}

static void run_compact(struct kvd *d, struct job *j)
{
	struct rpc_reply rp;
	kv_tenant *t;
	int rv;

	if (j->deadline_ms && now_ms() > j->deadline_ms) {
		job_reply_error(j, j->req.id, RPC_DEADLINE_EXCEEDED,
		                "deadline passed before the request ran; nothing was done");
		return;
	}
	if ((rv = kv_store_get(d->store, j->req.tenant, &t)) != 0) {
		char msg[512];
		rpc_tenant_message(d->store, j->req.tenant, rv, msg, sizeof(msg));
		job_reply_error(j, j->req.id, rpc_status_of(rv), msg);
		return;
	}
	rpc_reply_init(&rp);
	owner_watch(d, j->req.tenant, JOB_ATTACH);
	if (d->compact_hold_ms) {
		klog(LOG_WARNING, "test mode: tenant %s held by Compact", j->req.tenant);
		poll(NULL, 0, (int)d->compact_hold_ms);
	}
	rpc_run_read(d->store, t, &j->req, &rp);
	owner_watch(d, j->req.tenant, JOB_DETACH);
	kv_store_put(d->store, t);
	job_reply(j, &rp);
}

static void tick_tenants(struct kvd *d)
{
	struct kv_tenant_state *list;
	size_t n, i;
	uint64_t pass;

	if (kv_store_list(d->store, &list, &n) != 0)
		return;
	pass = ++d->tick_pass;
	for (i = 0; i < n && !atomic_load(&d->maint_quit); i++) {
		struct merge_retry *e;
		kv_tenant *t;
		int rv;
		if (!list[i].active)
			continue;
		if ((e = retry_find(d, list[i].name)) != NULL)
			e->seen = pass;
		if (kv_store_get_active(d->store, list[i].name, &t) != 0)
			continue;
		rv = kv_tick(kv_tenant_db(t));
		if (e != NULL && rv == 0) {
			/* no merge wanted any more (rule 4): a Compact did it */
			klog(LOG_INFO, "tenant %s: no merge needed any more (%u failed before)",
			     list[i].name, e->failures);
			retry_remove(d, e);
		}
		/* (the copies a merge a crash interrupts leaves are removed at
		 * the next activation: engine/recovery.c) */
		if (rv == -ESTALE) {
			/* a tenant of a shared device this node gave up (fenced,
			 * released, taken over): closed, not retried every tick */
			kv_store_put_unused(d->store, t);
			rv = kv_store_passivate(d->store, list[i].name);
			klog(LOG_INFO, "tenant %s: given up on the shared device: passivated%s",
			     list[i].name, rv == 0 ? "" : " (its last writes refused)");
			continue;
		}
		if (rv == 1 && !atomic_load(&d->stopping) &&
		    !retry_holds(d, list[i].name, now_ms()))
			merge_tenant(d, t);
		else if (rv < 0)
			klog(LOG_ERR, "tenant %s: %s", list[i].name, kv_strerror(rv));
		kv_store_put_unused(d->store, t);
	}
	/* the tenants not met active in a whole pass: passivated, dropped (rule 4) */
	if (i == n) {
		size_t j = 0;
		while (j < d->nretry)
			if (d->retry[j].seen != pass)
				retry_remove(d, &d->retry[j]);
			else
				j++;
	}
	free(list);
}

static void *maint_main(void *arg)
{
	struct kvd *d = arg;
	uint64_t last_maintain = now_ms(), last_status = 0;

	pthread_mutex_lock(&d->maint_mu);
	while (!atomic_load(&d->maint_quit)) {
		struct timespec ts;
		struct job *q;
		uint64_t now;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (d->maint_q == NULL)
			pthread_cond_timedwait(&d->maint_cv, &d->maint_mu, &ts);
		q = d->maint_q;
		d->maint_q = d->maint_q_tail = NULL;
		pthread_mutex_unlock(&d->maint_mu);

		while (q != NULL) {
			struct job *next = q->next;
			run_compact(d, q);
			q = next;
		}
		tick_tenants(d);
		now = now_ms();
		if (now - last_maintain >= 1000) {
			uint32_t passivated = 0;
			kv_store_maintain(d->store, &passivated);
			if (passivated)
				klog(LOG_INFO,
				     "passivated %u idle or least recently used tenant(s)",
				     passivated);
			last_maintain = now;
		}
		if (d->notify && now - last_status >= 2000) {
			struct kv_store_stats st;
			kv_store_stats(d->store, &st);
			sd_notifyf(0,
			           "STATUS=%" PRIu64 " tenants (%" PRIu64 " active), %" PRIu64
			           " requests, %" PRIu64 " in flight",
			           st.tenants, st.active, atomic_load(&d->requests),
			           atomic_load(&d->in_flight));
			last_status = now;
		}
		pthread_mutex_lock(&d->maint_mu);
	}
	/* requests still queued get an answer */
	while (d->maint_q != NULL) {
		struct job *j = d->maint_q;
		d->maint_q = j->next;
		job_reply_error(j, j->req.id, RPC_UNAVAILABLE, "shutting down");
	}
	pthread_mutex_unlock(&d->maint_mu);
	return NULL;
}

void maint_post(struct kvd *d, struct job *j)
{
	pthread_mutex_lock(&d->maint_mu);
	j->next = NULL;
	if (d->maint_q_tail)
		d->maint_q_tail->next = j;
	else
		d->maint_q = j;
	d->maint_q_tail = j;
	pthread_cond_signal(&d->maint_cv);
	pthread_mutex_unlock(&d->maint_mu);
}

int maint_start(struct kvd *d)
{
	pthread_mutex_init(&d->maint_mu, NULL);
	pthread_cond_init(&d->maint_cv, NULL);
	if (pthread_create(&d->maint, NULL, maint_main, d) != 0)
		return -EAGAIN;
	d->maint_running = true;
	return 0;
}

void maint_stop(struct kvd *d)
{
	if (!d->maint_running)
		return;
	pthread_mutex_lock(&d->maint_mu);
	atomic_store(&d->maint_quit, true);
	pthread_cond_signal(&d->maint_cv);
	pthread_mutex_unlock(&d->maint_mu);
	pthread_join(d->maint, NULL);
	d->maint_running = false;
	free(d->retry);
	d->retry = NULL;
	d->nretry = d->capretry = 0;
}
