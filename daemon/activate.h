/*
 * activate.h — tenants activated off the workers. A request of a tenant that
 * is not active (passive, being created, opened or closed) is parked on its
 * worker and the activation handed to a small pool of activator threads; the
 * worker goes on serving its other tenants, and runs the parked requests, in
 * the order they came, once the activator is done. A parked request whose
 * deadline passes is answered DEADLINE_EXCEEDED (nothing was done).
 *
 * Threads: acts_* on the owning worker's thread; activators_* on the main
 * thread: activators_stop before workers_stop (it posts what it still holds
 * back to the workers; later requests activate their tenant on the worker),
 * activators_free after it.
 */
#ifndef KVD_ACTIVATE_H
#define KVD_ACTIVATE_H

#include <stdint.h>

#include "kvengine.h"

struct kvd;
struct worker;
struct job;
struct act_wait;

#define ACTIVATORS         2u   /* activator threads: activations of different tenants at once */
#define ACTIVATOR_NICE     19   /* their nice value (the workers keep the process's) ... */
#define ACTIVATOR_BOOST_MS 1000 /* ... for this long; then nice 0 (activators_tick) */

/* The tenants a worker waits for, each with its parked requests. */
struct acts {
	struct act_wait *head;
	uint32_t parked; /* requests parked, all tenants */
};

int activators_start(struct kvd *d);
void activators_stop(struct kvd *d);
void activators_free(struct kvd *d);
/* Every second or so: an activation running for ACTIVATOR_BOOST_MS goes on
 * at the workers' priority, so a busy node still gets it done. */
void activators_tick(struct kvd *d);

/* Before a request of j->req.tenant runs: 0 and *ret_t (a reference,
 * kv_store_put it) when the tenant is active; 1 when j was parked (it runs
 * again through worker_run once the tenant is); or an error of
 * kv_store_get_ready (-ENOENT, -EINVAL) for the caller to answer. */
int acts_gate(struct worker *w, struct job *j, kv_tenant **ret_t);
/* A JOB_ACTIVATED job came back: its requests run, or get the activation's
 * error. */
void acts_done(struct worker *w, struct job *j);
/* The earliest deadline of a parked request (0: none). */
uint64_t acts_next_deadline(struct worker *w);
/* Answers the parked requests whose deadline passed. */
void acts_expire(struct worker *w, uint64_t now);
/* At the worker's end (the activators stopped): answers every parked
 * request UNAVAILABLE and forgets the activations. */
void acts_close_all(struct worker *w);

#endif
