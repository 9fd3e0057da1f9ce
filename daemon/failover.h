/*
 * failover.h — on a device shared by several nodes (docs/SCALEOUT.md), the
 * thread that finds tenants whose owner node is gone and has one surviving
 * node take each of them over.
 *
 * Every interval it lists, in etcd, the live device node numbers
 * (`<prefix>slots/<K>`, each holding its node's id on that node's lease)
 * and the tenants that have an owner (`<prefix>tenants/<name>/owner`), and
 * from the device every tenant with the node number of its newest entry
 * (kv_store_device_tenants). A tenant is orphaned when it has no owner key
 * and its node number has no slot key. One that stays orphaned for the
 * grace period is taken by the live node that rendezvous hashing picks
 * (failover_winner): every survivor computes the same winner from the same
 * lists, so at most one of them tries; the take itself (put-if-absent of
 * the owner key) decides should two try at once. Nothing is ever given
 * back: a node that returns finds its tenants' newest entries naming
 * another node.
 *
 * The thread has its own etcd connection; it calls conf.take (cluster.c)
 * and reads the store, never with a lock of its own held. It only logs
 * what it cannot do (rate-limited); the take logs the takeover.
 */
#ifndef KVD_FAILOVER_H
#define KVD_FAILOVER_H

#include "kvengine.h"

#include <stddef.h>
#include <stdint.h>

struct failover;

struct failover_conf {
	const char *etcd;    /* etcd's endpoints */
	int call_ms;         /* an etcd call at most */
	const char *prefix;  /* "/kvd/<cluster>/" */
	const char *node;    /* this node's id */
	int64_t interval_ms; /* between two looks (> 0) */
	int64_t grace_ms;    /* a tenant is orphaned this long before it is taken */
	kv_store *store;     /* a shared device's store */
	/* Takes tenant `name`, orphaned for orphan_ms, which this node won: 0
	 * taken, or -errno (tried again next time while it stays orphaned). */
	int (*take)(void *arg, const char *name, uint64_t orphan_ms);
	void *arg;
};

/* Starts the thread (conf is copied; its strings and store must outlive
 * it). 0, or -ENOMEM, -EINVAL (a bad etcd list), -errno of pthread_create,
 * with one line in err. */
int failover_start(const struct failover_conf *conf, struct failover **ret, char *err,
                   size_t errlen);

/* Stops the thread (waits for a take under way) and frees f; NULL is fine. */
void failover_stop(struct failover *f);

/* Tenants this node took over so far (kvd_failover_adoptions_total); NULL: 0. */
uint64_t failover_adoptions(const struct failover *f);

/* Rendezvous hashing: the index in nodes[0..n) of the node with the
 * highest XXH64 of "<tenant>\0<node>"; ties (never in practice) to the
 * smaller id. n > 0. */
size_t failover_winner(const char *tenant, const char *const *nodes, size_t n);

#endif
