/*
 * activate.c — tenants activated off the workers (activate.h).
 *
 * A worker that finds a request's tenant not active (acts_gate) parks the
 * request on an act_wait of that tenant, creating it and queueing it for
 * the activators when it is the first. An activator takes it, runs
 * kv_store_get (which creates, activates or waits for the tenant, however
 * long that takes), lets the reference go and posts the act_wait's own job
 * (JOB_ACTIVATED) back to the worker. The worker (acts_done) takes the
 * act_wait out of its list and runs the parked requests through worker_run
 * again, in the order they came; they find the tenant active (or park once
 * more if it was passivated in between).
 *
 * Invariants:
 *   1. An act_wait is in its worker's list from the first parked request
 *      until the worker takes its JOB_ACTIVATED; a later request of the
 *      same tenant parks behind the others, so a client's requests keep
 *      their order. Only the worker's thread touches the list and the
 *      parked jobs; the activator touches only the tenant name and rv.
 *   2. Every act_wait queued is posted back exactly once (activators_stop
 *      drains the queue, with -ESHUTDOWN for those never started), so it
 *      is freed by its worker and no parked request is left unanswered.
 *   3. A parked request past its deadline is answered (acts_expire) and
 *      leaves the list; the act_wait stays until its activation ends.
 *
 * Priority: an activation starts at nice ACTIVATOR_NICE, so where the
 * workers and an activation both want a CPU the workers' requests come first
 * (on 2 CPUs, a neighbour tenant's p99 moved 1.6x during a 1M-key activation
 * from hints, against 7.7x at nice 10: docs/BENCHMARKS.md section 6); one
 * still running after ACTIVATOR_BOOST_MS goes on at nice 0 (activators_tick,
 * from the main thread), so a busy node cannot starve it. Without the right
 * to set nice 0 again (RLIMIT_NICE), activations run at nice 0 throughout.
 */
#include "activate.h"

#include "kvd.h"
#include "log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct act_wait {
	struct job done; /* first: JOB_ACTIVATED, posted back to the worker */
	char tenant[KV_TENANT_NAME_MAX + 1];
	uint32_t worker;
	int rv;                  /* kv_store_get's result */
	struct job *head, *tail; /* parked requests, in arrival order */
	struct act_wait *next;   /* the worker's list */
	struct act_wait *qnext;  /* the activators' queue */
};

struct activators {
	struct kvd *d;
	pthread_t th[ACTIVATORS];
	uint32_t nth;
	struct {
		_Atomic pid_t tid;
		_Atomic uint64_t since_ms; /* the activation running began then; 0: none */
		atomic_bool boosted;       /* activators_tick set it to nice 0 */
	} slot[ACTIVATORS];
	int low_nice; /* what an activation starts at: ACTIVATOR_NICE, or 0 (can_raise) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct act_wait *qh, *qt;
	bool quit;
};

struct activator_arg {
	struct activators *a;
	uint32_t i;
};

static void *activator_main(void *arg)
{
	struct activators *a = ((struct activator_arg *)arg)->a;
	uint32_t me = ((struct activator_arg *)arg)->i;
	struct kvd *d = a->d;

	free(arg);
	atomic_store(&a->slot[me].tid, gettid());

	for (;;) {
		struct act_wait *aw;
		bool quit;
		kv_tenant *t;
		pthread_mutex_lock(&a->mu);
		while (a->qh == NULL && !a->quit)
			pthread_cond_wait(&a->cv, &a->mu);
		aw = a->qh;
		if (aw == NULL) {
			pthread_mutex_unlock(&a->mu);
			break;
		}
		if ((a->qh = aw->qnext) == NULL)
			a->qt = NULL;
		quit = a->quit;
		pthread_mutex_unlock(&a->mu);
		if (quit) {
			aw->rv = -ESHUTDOWN;
		} else {
			/* the workers' requests come first where both want a CPU
			 * (a thread's own nice value on Linux; nothing lost when
			 * it cannot be set), until activators_tick says the
			 * activation has waited long enough */
			(void)setpriority(PRIO_PROCESS, (id_t)gettid(), a->low_nice);
			atomic_store(&a->slot[me].boosted, false);
			atomic_store(&a->slot[me].since_ms, now_ms());
#ifdef KVD_TEST_HOOKS
			/* KVD_TEST_ACTIVATE_HOLD_MS (main.c): a slow activation */
			if (d->activate_hold_ms)
				poll(NULL, 0, (int)d->activate_hold_ms);
#endif
			aw->rv = kv_store_get(d->store, aw->tenant, &t);
			if (aw->rv == 0)
				kv_store_put(d->store, t);
			atomic_store(&a->slot[me].since_ms, 0);
		}
		worker_post(d, aw->worker, &aw->done); /* never refused: not a request */
	}
	return NULL;
}

/* Whether a thread set to a higher nice value may be set back to 0: root,
 * or an RLIMIT_NICE that allows nice 0 (the unit's LimitNICE=+0). */
static bool can_raise(void)
{
	struct rlimit rl;

	if (geteuid() == 0)
		return true;
	return getrlimit(RLIMIT_NICE, &rl) == 0 &&
	       (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20);
}

int activators_start(struct kvd *d)
{
	struct activators *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return -ENOMEM;
	a->d = d;
	a->low_nice = ACTIVATOR_NICE;
	if (!can_raise()) {
		/* lowered for good, a long activation could starve on a busy
		 * node: better none at all */
		a->low_nice = 0;
		klog(LOG_NOTICE, "activations run at the workers' priority: RLIMIT_NICE does "
		                 "not allow raising them back to nice 0 (systemd: LimitNICE=+0)");
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	d->activators = a;
	for (a->nth = 0; a->nth < ACTIVATORS; a->nth++) {
		struct activator_arg *arg = malloc(sizeof(*arg));
		if (arg == NULL)
			return -ENOMEM;
		*arg = (struct activator_arg){a, a->nth};
		if (pthread_create(&a->th[a->nth], NULL, activator_main, arg) != 0) {
			free(arg);
			return -EAGAIN;
		}
	}
	return 0;
}

void activators_tick(struct kvd *d)
{
	struct activators *a = d->activators;
	uint64_t now = now_ms();

	if (a == NULL)
		return;
	for (uint32_t i = 0; i < a->nth; i++) {
		uint64_t since = atomic_load(&a->slot[i].since_ms);
		if (since != 0 && now - since >= ACTIVATOR_BOOST_MS &&
		    !atomic_exchange(&a->slot[i].boosted, true))
			(void)setpriority(PRIO_PROCESS, (id_t)atomic_load(&a->slot[i].tid), 0);
	}
}

void activators_stop(struct kvd *d)
{
	struct activators *a = d->activators;

	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->quit = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	for (uint32_t i = 0; i < a->nth; i++)
		pthread_join(a->th[i], NULL);
	a->nth = 0;
	/* none started (invariant 2): the workers answer their requests */
	pthread_mutex_lock(&a->mu);
	while (a->qh != NULL) {
		struct act_wait *aw = a->qh;
		a->qh = aw->qnext;
		aw->rv = -ESHUTDOWN;
		worker_post(d, aw->worker, &aw->done);
	}
	a->qt = NULL;
	pthread_mutex_unlock(&a->mu);
}

void activators_free(struct kvd *d)
{
	struct activators *a = d->activators;

	if (a == NULL)
		return;
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
	d->activators = NULL;
}

static void park(struct act_wait *aw, struct job *j)
{
	j->next = NULL;
	if (aw->tail != NULL)
		aw->tail->next = j;
	else
		aw->head = j;
	aw->tail = j;
}

int acts_gate(struct worker *w, struct job *j, kv_tenant **ret_t)
{
	struct kvd *d = worker_kvd(w);
	struct acts *as = worker_acts(w);
	struct activators *a = d->activators;
	struct act_wait *aw;
	int rv;

	for (aw = as->head; aw != NULL; aw = aw->next)
		if (strcmp(aw->tenant, j->req.tenant) == 0)
			break;
	if (aw == NULL) {
		if ((rv = kv_store_get_ready(d->store, j->req.tenant, ret_t)) != -EAGAIN)
			return rv;
		if ((aw = calloc(1, sizeof(*aw))) == NULL)
			return kv_store_get(d->store, j->req.tenant, ret_t); /* here, then */
		aw->done.kind = JOB_ACTIVATED;
		aw->done.d = d;
		snprintf(aw->tenant, sizeof(aw->tenant), "%s", j->req.tenant);
		aw->worker = worker_id(w);
		pthread_mutex_lock(&a->mu);
		if (a->quit) {
			/* shutting down: no activator takes it any more */
			pthread_mutex_unlock(&a->mu);
			free(aw);
			return kv_store_get(d->store, j->req.tenant, ret_t);
		}
		if (a->qt != NULL)
			a->qt->qnext = aw;
		else
			a->qh = aw;
		a->qt = aw;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->mu);
		aw->next = as->head;
		as->head = aw;
	}
	park(aw, j);
	as->parked++;
	return 1;
}

/* Takes aw out of the worker's list; its parked requests are returned. */
static struct job *unlink_wait(struct acts *as, struct act_wait *aw)
{
	struct job *q = aw->head;

	for (struct act_wait **p = &as->head; *p != NULL; p = &(*p)->next)
		if (*p == aw) {
			*p = aw->next;
			break;
		}
	for (struct job *j = q; j != NULL; j = j->next)
		as->parked--;
	return q;
}

#define SHUTTING_DOWN "shutting down; the tenant was left as it was"

/* Answers every request of the list q with status and msg. */
static void reply_all(struct job *q, int status, const char *msg)
{
	while (q != NULL) {
		struct job *next = q->next;
		job_reply_error(q, q->req.id, status, msg);
		q = next;
	}
}

void acts_done(struct worker *w, struct job *done)
{
	struct kvd *d = worker_kvd(w);
	struct act_wait *aw = (struct act_wait *)done;
	struct job *q = unlink_wait(worker_acts(w), aw);
	int rv = aw->rv;
	char msg[512];

	if (rv == -ESHUTDOWN) {
		reply_all(q, RPC_UNAVAILABLE, SHUTTING_DOWN);
	} else if (rv != 0) {
		rpc_tenant_message(d->store, aw->tenant, rv, msg, sizeof(msg));
		reply_all(q, rpc_status_of(rv), msg);
	} else {
		while (q != NULL) {
			struct job *next = q->next;
			worker_run(w, q);
			q = next;
		}
	}
	free(aw);
}

uint64_t acts_next_deadline(struct worker *w)
{
	struct acts *as = worker_acts(w);
	uint64_t first = 0;

	if (as->parked == 0)
		return 0;
	for (struct act_wait *aw = as->head; aw != NULL; aw = aw->next)
		for (struct job *j = aw->head; j != NULL; j = j->next)
			if (j->deadline_ms && (first == 0 || j->deadline_ms < first))
				first = j->deadline_ms;
	return first;
}

void acts_expire(struct worker *w, uint64_t now)
{
	struct acts *as = worker_acts(w);

	if (as->parked == 0)
		return;
	for (struct act_wait *aw = as->head; aw != NULL; aw = aw->next) {
		struct job *keep = NULL, *tail = NULL, *j = aw->head;
		while (j != NULL) {
			struct job *next = j->next;
			if (j->deadline_ms && now > j->deadline_ms) {
				as->parked--;
				job_reply_error(j, j->req.id, RPC_DEADLINE_EXCEEDED,
				                "deadline passed while the tenant was being "
				                "activated; nothing was done");
			} else {
				j->next = NULL;
				if (tail != NULL)
					tail->next = j;
				else
					keep = j;
				tail = j;
			}
			j = next;
		}
		aw->head = keep;
		aw->tail = tail;
	}
}

void acts_close_all(struct worker *w)
{
	struct acts *as = worker_acts(w);

	while (as->head != NULL) {
		struct act_wait *aw = as->head;
		reply_all(unlink_wait(as, aw), RPC_UNAVAILABLE, SHUTTING_DOWN);
		free(aw);
	}
}
