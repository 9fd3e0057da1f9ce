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

static int merge_tenant(struct kvd *d, kv_tenant *t)
{
	uint64_t t0 = now_ms();
	struct kv_stats before, after;
	int rv;

	kv_stats(kv_tenant_db(t), &before);
	owner_watch(d, kv_tenant_name(t), JOB_ATTACH);
	rv = kv_merge(kv_tenant_db(t));
	owner_watch(d, kv_tenant_name(t), JOB_DETACH);
	kv_stats(kv_tenant_db(t), &after);
	metrics_merge(now_ms() - t0, rv == 0);
	if (rv != 0)
		klog(LOG_ERR, "tenant %s: merge failed: %s", kv_tenant_name(t), kv_strerror(rv));
	else
		klog(LOG_INFO,
		     "tenant %s: merged in %" PRIu64 " ms, %" PRIu64 " -> %" PRIu64 " bytes",
		     kv_tenant_name(t), now_ms() - t0, before.disk_bytes, after.disk_bytes);
	return rv;
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

	if (kv_store_list(d->store, &list, &n) != 0)
		return;
	for (i = 0; i < n && !atomic_load(&d->maint_quit); i++) {
		kv_tenant *t;
		int rv;
		if (!list[i].active || kv_store_get_active(d->store, list[i].name, &t) != 0)
			continue;
		rv = kv_tick(kv_tenant_db(t));
		/* (the copies a merge a crash interrupts leaves are removed at
		 * the next activation: engine/recovery.c) */
		if (rv == 1 && !atomic_load(&d->stopping))
			merge_tenant(d, t);
		else if (rv < 0)
			klog(LOG_ERR, "tenant %s: %s", list[i].name, kv_strerror(rv));
		kv_store_put_unused(d->store, t);
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
}
