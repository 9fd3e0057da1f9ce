/*
 * cluster.h — kvd as one node of a cluster (docs/CLUSTER.md): its etcd
 * lease, the tenants it owns (each by an owner key taken with put-if-absent;
 * the revision of that put is the tenant's epoch), self-fencing when its
 * lease cannot be confirmed, and the answers a request gets on a node that
 * does not own its tenant (MOVED, with the owner's address).
 *
 * Without `etcd` in the settings there is no cluster (d->cluster is NULL)
 * and every call here lets requests through as a single kvd serves them;
 * only TenantAdopt and TenantRelease are refused (FAILED_PRECONDITION).
 *
 * Threads: cluster_start and cluster_stop on the main thread; cluster_gate
 * on the thread that dispatches a request; cluster_tenant_done on the
 * tenant's worker; cluster_may_write anywhere. cluster.c has its own
 * keepalive thread.
 */
#ifndef KVD_CLUSTER_H
#define KVD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvd;
struct job;
struct cluster;
struct rpc_req;
struct rpc_reply;
struct rpc_owner;

/* Joins the cluster when the settings name etcd: grants the node's lease,
 * registers the node's key, starts the keepalive thread; sets d->cluster
 * (NULL without etcd, and 0). 0, or -EINVAL (node_id or advertise missing
 * or invalid), -EEXIST (the node id is registered by a live lease), -ENOMEM,
 * or an etcd error (-ECONNREFUSED, -ETIMEDOUT, ...), with one line in err.
 * On a device shared by several nodes (docs/SCALEOUT.md) also: -EINVAL
 * without etcd, -EEXIST when another live node holds its device_node; and
 * it starts the failover thread (failover.h). After the store opened. */
int cluster_start(struct kvd *d, char *err, size_t errlen);

/* Before the store closes (after the workers stopped): stops the failover
 * thread of a shared device, and fencing no longer tells the store.
 * NULL cluster is fine. */
void cluster_store_closing(struct kvd *d);

/* Stops the keepalive thread and revokes the node's lease, which releases
 * every tenant it owns at once (clean shutdown); frees d->cluster. NULL
 * cluster is fine. After the workers stopped. */
void cluster_stop(struct kvd *d);

/* Whether this node may write now: not in cluster mode, or its last
 * successful keepalive was sent less than TTL minus the fencing margin ago
 * and the node is not fenced. NULL is fine (true). */
bool cluster_may_write(const struct cluster *c);

/* Whether this node serves `tenant` now: no cluster, or the tenant is
 * owned here under the current lease (and on a shared device the engine
 * has claimed it). NULL cluster is fine (true). Any thread. */
bool cluster_serves(struct cluster *c, const char *tenant);

/* cluster_serves, with the epoch the tenant is served under: 0 when it is
 * not served here, else its epoch (1 without a cluster). A tenant lost
 * and taken again comes back under a new epoch. Any thread. */
uint64_t cluster_serving_epoch(struct cluster *c, const char *tenant);

/* Before a request runs (after its token check): false when it may go on
 * (its tenant is owned here, or the request needs no tenant); true when it
 * was answered here: MOVED (another node owns the tenant), UNAVAILABLE (the
 * node is fenced, or etcd cannot be asked), TenantAdopt's answer, or
 * FAILED_PRECONDITION (TenantAdopt or TenantRelease without a cluster, or
 * of a tenant that has no owner / another owner). May block on etcd for at
 * most its call timeout when the tenant is not known yet. */
bool cluster_gate(struct kvd *d, struct job *j);

/* After a tenant method ran on the tenant's worker (rp holds its reply):
 * TenantRelease or TenantDrop that succeeded deletes the tenant's owner key
 * (rp becomes UNAVAILABLE when etcd cannot be told). Others: nothing. */
void cluster_tenant_done(struct kvd *d, const struct rpc_req *r, struct rpc_reply *rp);

/* A TenantRelease that passed cluster_gate is answered without running
 * (its worker's queue full, its deadline passed): requests on its tenant
 * go on. Others: nothing. */
void cluster_release_undo(struct kvd *d, const struct rpc_req *r);

/* Tenants of a shared device this node took over from nodes that were
 * gone (failover.h), since it started; NULL is fine (0). Any thread. */
uint64_t cluster_failover_adoptions(const struct cluster *c);

/* rpc_limits.owners (set by cluster_start): every tenant that has an owner
 * in etcd, sorted by name; 0, -ENOMEM or an etcd error. Any thread. */
int cluster_owners(void *arg, struct rpc_owner **ret, size_t *ret_n);

#endif
