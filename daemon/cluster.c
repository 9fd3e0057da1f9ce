/*
 * cluster.c — one kvd node of a cluster whose ownership records live in
 * etcd (docs/CLUSTER.md, docs/ETCD.md).
 *
 * What it owns: the node's etcd lease and key, the table of tenants this
 * node owns (name -> epoch, under the lease generation that took them), a
 * short-lived cache of other nodes' tenants (name -> owner, for MOVED), and
 * the keepalive thread.
 *
 * Invariants:
 *   1. A tenant is served here only while it is in `owned` with the current
 *      lease generation and the node may write (cluster_may_write). Its
 *      owner key was created by this node's put-if-absent on that lease;
 *      the put's revision is the entry's epoch.
 *   2. cluster_may_write is false once the last successful keepalive was
 *      SENT more than TTL - margin ago: etcd may expire the lease TTL after
 *      the last renewal it received, which is after the send, so a node
 *      that stops writing at TTL - margin since the send stops before
 *      another node can take its tenants (clocks of one host; the margin
 *      covers a write already past the check).
 *   3. Fencing (fence()) empties `owned`, bumps `gen` and sets `fenced`;
 *      only the keepalive thread clears `fenced`, after it revoked the old
 *      lease (best effort) and registered with a new one. Tenants are then
 *      taken again one by one, each by a new put-if-absent: a new epoch.
 *   4. A node never deletes an owner key another node created: release and
 *      drop delete only the key whose value is this node's, and a stale key
 *      of this node's own older lease only by its mod_revision.
 *
 * On a device shared by several nodes (kv_store_shared; docs/SCALEOUT.md)
 * also:
 *   5. The node holds `/kvd/<cluster>/slots/<device_node>` (its node id) on
 *      its lease while it is registered: two live nodes never write with
 *      one device node number.
 *   6. A tenant is served only once the engine has it too: kv_store_claim
 *      at the owner key's epoch (`claimed`), done once per epoch under
 *      `claim_mu`; when that fails, the owner key goes again.
 *   7. The engine gives a tenant up (kv_store_disown) before anything else
 *      when the node fences itself (every tenant), and before its owner key
 *      is deleted when it is released: no write of an old epoch reaches the
 *      device once another node could take the tenant.
 *   8. Tenants whose owner node is gone are taken over by a survivor
 *      (failover.c, through failover_take here).
 *
 * Threads: `mu` guards owned, seen, lease, gen and fenced; `op_mu` guards
 * `op`, the etcd connection of request threads (claims, lookups, releases);
 * the keepalive thread has its own connection `ka`, the failover thread its
 * own. No etcd call is made with `mu` held; `claim_mu` is taken before
 * `mu` and `op_mu`, never after.
 */
#include "cluster.h"

#include "etcd.h"
#include "failover.h"
#include "kvd.h"
#include "log.h"
#include "mp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CLUSTER_BUCKETS     1024  /* hash buckets of owned and seen */
#define CLUSTER_SEEN_MS     1000  /* how long another node's ownership is believed */
#define CLUSTER_MARGIN_MIN  500   /* ms: the fencing margin at least */
#define CLUSTER_CALL_MAX_MS 3000  /* an etcd call of a request thread at most */
#define CLUSTER_RELEASE_MS  60000 /* a TenantRelease keeps requests off its tenant at most */
#define CLUSTER_VALUE_MAX   (64 + 1 + 256 + 1)

struct owned {
	char name[KV_TENANT_NAME_MAX + 1];
	int64_t epoch;      /* create revision of the owner key */
	uint64_t gen;       /* lease generation that took it */
	uint64_t releasing; /* TenantRelease is passivating it until then (monotonic ms;
	                       a bound in case its job is lost before it ran) */
	bool claimed;       /* shared device: kv_store_claim took it at epoch */
	struct owned *next;
};

struct seen {
	char name[KV_TENANT_NAME_MAX + 1];
	char node[65];
	char addr[256];
	int64_t epoch;
	uint64_t until_ms;
	struct seen *next;
};

struct cluster {
	struct kvd *d;
	char node[65];
	char addr[256];
	char value[CLUSTER_VALUE_MAX]; /* "<node> <addr>": what our owner keys hold */
	char prefix[128];              /* "/kvd/<cluster>/" */
	int64_t ttl_ms, margin_ms, interval_ms;

	pthread_mutex_t mu;
	struct owned *owned[CLUSTER_BUCKETS];
	struct seen *seen[CLUSTER_BUCKETS];
	int64_t lease;
	uint64_t gen;
	bool fenced;
	_Atomic uint64_t
	        last_ok_sent_ms; /* monotonic: when the last confirmed keepalive was sent */
	atomic_bool fenced_flag; /* fenced, for cluster_may_write without mu */

	pthread_mutex_t op_mu;
	struct etcd *op;

	struct etcd *ka; /* the keepalive thread's */

	bool shared;              /* the store's device is shared (invariants 5-8) */
	uint32_t device_node;     /* its node number there */
	pthread_mutex_t claim_mu; /* one kv_store_claim at a time (invariant 6) */
	pthread_mutex_t store_mu; /* guards store_open against the store's close */
	bool store_open;          /* fence() may tell the store (cluster_store_closing) */
	struct failover *fo;      /* failover.c's thread; NULL when not shared */
	pthread_t thread;
	bool running;
	pthread_mutex_t wait_mu;
	pthread_cond_t wait_cv;
	bool quit;
};

/* ---- small helpers ---------------------------------------------------- */

static unsigned bucket(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name != '\0'; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h % CLUSTER_BUCKETS;
}

static bool id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static int key_of(const struct cluster *c, const char *what, const char *name, const char *suffix,
                  char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s%s/%s%s", c->prefix, what, name, suffix);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

static struct owned *owned_find(struct cluster *c, const char *name)
{
	struct owned *o;

	for (o = c->owned[bucket(name)]; o != NULL; o = o->next)
		if (strcmp(o->name, name) == 0)
			return o;
	return NULL;
}

static void owned_remove(struct cluster *c, const char *name)
{
	struct owned **p;

	for (p = &c->owned[bucket(name)]; *p != NULL; p = &(*p)->next) {
		if (strcmp((*p)->name, name) == 0) {
			struct owned *o = *p;
			*p = o->next;
			free(o);
			return;
		}
	}
}

static void owned_clear(struct cluster *c)
{
	for (unsigned b = 0; b < CLUSTER_BUCKETS; b++) {
		while (c->owned[b] != NULL) {
			struct owned *o = c->owned[b];
			c->owned[b] = o->next;
			free(o);
		}
	}
}

static struct seen *seen_find(struct cluster *c, const char *name, uint64_t now)
{
	struct seen **p = &c->seen[bucket(name)], *s;

	while ((s = *p) != NULL) {
		if (s->until_ms <= now) { /* expired entries go as they are met */
			*p = s->next;
			free(s);
			continue;
		}
		if (strcmp(s->name, name) == 0)
			return s;
		p = &s->next;
	}
	return NULL;
}

static void seen_put(struct cluster *c, const char *name, const char *node, const char *addr,
                     int64_t epoch)
{
	uint64_t now = now_ms();
	struct seen *s = seen_find(c, name, now);
	unsigned b = bucket(name);

	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			return; /* only a cache */
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->next = c->seen[b];
		c->seen[b] = s;
	}
	snprintf(s->node, sizeof(s->node), "%s", node);
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	s->epoch = epoch;
	s->until_ms = now + CLUSTER_SEEN_MS;
}

static void seen_forget(struct cluster *c, const char *name)
{
	struct seen **p;

	for (p = &c->seen[bucket(name)]; *p != NULL; p = &(*p)->next) {
		if (strcmp((*p)->name, name) == 0) {
			struct seen *s = *p;
			*p = s->next;
			free(s);
			return;
		}
	}
}

static void seen_clear(struct cluster *c)
{
	for (unsigned b = 0; b < CLUSTER_BUCKETS; b++) {
		while (c->seen[b] != NULL) {
			struct seen *s = c->seen[b];
			c->seen[b] = s->next;
			free(s);
		}
	}
}

/* "<node> <address>" into its parts; false when it is not that. */
static bool owner_split(const struct etcd_kv *kv, char *node, size_t nlen, char *addr, size_t alen)
{
	const char *sp = memchr(kv->value, ' ', kv->value_len);
	size_t n, a;

	if (sp == NULL)
		return false;
	n = (size_t)(sp - kv->value);
	a = kv->value_len - n - 1;
	if (n == 0 || n >= nlen || a == 0 || a >= alen)
		return false;
	memcpy(node, kv->value, n);
	node[n] = '\0';
	memcpy(addr, sp + 1, a);
	addr[a] = '\0';
	return true;
}

/* ---- fencing ----------------------------------------------------------- */

bool cluster_may_write(const struct cluster *c)
{
	if (c == NULL)
		return true;
	if (atomic_load(&c->fenced_flag))
		return false;
	return (int64_t)(now_ms() - atomic_load(&c->last_ok_sent_ms)) < c->ttl_ms - c->margin_ms;
}

/* kv_store_disown of every tenant, while the store is open. */
static int store_disown_all(struct cluster *c)
{
	int rv;

	pthread_mutex_lock(&c->store_mu);
	rv = c->store_open ? kv_store_disown(c->d->store, NULL) : 0;
	pthread_mutex_unlock(&c->store_mu);
	return rv;
}

/* Gives every tenant up (invariants 3 and 7); says why once. */
static void fence(struct cluster *c, const char *why)
{
	bool was;
	int rv = 0;

	/* invariant 7: the device first, before anything else can wait */
	if (c->shared && !atomic_load(&c->fenced_flag))
		rv = store_disown_all(c);
	pthread_mutex_lock(&c->mu);
	was = c->fenced;
	if (!was) {
		c->fenced = true;
		atomic_store(&c->fenced_flag, true);
		c->gen++;
		owned_clear(c);
		seen_clear(c);
	}
	pthread_mutex_unlock(&c->mu);
	/* and again: a claim the engine finished between the first and the
	 * fence saw no fence yet (device_claim checks it after the engine) */
	if (c->shared && !was && rv == 0)
		rv = store_disown_all(c);
	if (rv != 0)
		klog(LOG_ERR, "cluster: node %s: giving the device's tenants up: %s", c->node,
		     kv_strerror(rv));
	if (!was)
		klog(LOG_ERR,
		     "cluster: node %s fenced (%s): every tenant given up until a new lease",
		     c->node, why);
	pthread_mutex_lock(&c->wait_mu);
	pthread_cond_signal(&c->wait_cv);
	pthread_mutex_unlock(&c->wait_mu);
}

/* ---- the node's lease and key ------------------------------------------ */

/* put-if-absent of key = val on lease. A key of this node's `stale` lease
 * (holding val too, when same_value) is deleted first, once. 0; ETCD_EXISTS
 * with the holder in *cur (the caller clears it); or etcd's error. */
static int key_take(struct etcd *e, const char *key, size_t klen, const char *val, int64_t lease,
                    int64_t stale, bool same_value, struct etcd_kv *cur)
{
	size_t vlen = strlen(val);
	int64_t rev;
	int rv;

	for (int tries = 0;; tries++) {
		rv = etcd_put_if_absent(e, key, klen, val, vlen, lease, &rev, cur);
		if (rv != ETCD_EXISTS)
			return rv;
		if (stale == 0 || cur->lease != stale || tries > 0 ||
		    (same_value && (vlen != cur->value_len || memcmp(cur->value, val, vlen) != 0)))
			return ETCD_EXISTS;
		rv = etcd_delete_if_mod(e, key, klen, cur->mod_rev);
		etcd_kv_clear(cur);
		if (rv < 0)
			return rv;
	}
}

/* Takes the device node number on `lease` (invariant 5): put-if-absent of
 * slots/<K> holding the node id; a key of this node's `stale` lease is
 * deleted first. 0, -EEXIST (another node holds it) or an etcd error, with
 * one line in err. */
static int slot_take(struct cluster *c, struct etcd *e, int64_t lease, int64_t stale, char *err,
                     size_t errlen)
{
	char key[256], num[16];
	struct etcd_kv cur = {0};
	int rv, klen;

	snprintf(num, sizeof(num), "%" PRIu32, c->device_node);
	if ((klen = key_of(c, "slots", num, "", key, sizeof(key))) < 0)
		return klen;
	rv = key_take(e, key, (size_t)klen, c->node, lease, stale, true, &cur);
	if (rv == ETCD_EXISTS) {
		snprintf(err, errlen,
		         "device node %" PRIu32 " is held in etcd by node '%s' (lease %" PRIx64
		         "): each node sharing the device needs a device_node of its own "
		         "(it is free again when that lease ends)",
		         c->device_node, cur.value, (uint64_t)cur.lease);
		etcd_kv_clear(&cur);
		return -EEXIST;
	}
	if (rv != 0) {
		snprintf(err, errlen, "etcd: taking device node %" PRIu32 ": %s", c->device_node,
		         etcd_errmsg(e));
		return rv < 0 ? rv : -EIO;
	}
	return 0;
}

/* Grants a lease and registers the node key on it, and on a shared device
 * the node's device node number (slot_take). stale: a lease of ours whose
 * keys may still be there (deleted first). */
static int node_register(struct cluster *c, struct etcd *e, int64_t stale, int64_t *ret_lease,
                         char *err, size_t errlen)
{
	char key[256];
	int64_t lease, ttl;
	struct etcd_kv cur = {0};
	int rv, klen;

	if ((klen = key_of(c, "nodes", c->node, "", key, sizeof(key))) < 0)
		return klen;
	if ((rv = etcd_lease_grant(e, c->ttl_ms / 1000, &lease, &ttl)) != 0) {
		snprintf(err, errlen, "etcd: granting a lease: %s", etcd_errmsg(e));
		return rv < 0 ? rv : -EIO;
	}
	rv = key_take(e, key, (size_t)klen, c->addr, lease, stale, false, &cur);
	if (rv == ETCD_EXISTS) {
		snprintf(err, errlen,
		         "node id '%s' is registered in etcd by another process (lease %" PRId64
		         ", address %s); it goes when that lease ends (lease_ttl)",
		         c->node, cur.lease, cur.value);
		etcd_kv_clear(&cur);
		etcd_lease_revoke(e, lease);
		return -EEXIST;
	}
	if (rv != 0) {
		snprintf(err, errlen, "etcd: registering node '%s': %s", c->node, etcd_errmsg(e));
		etcd_lease_revoke(e, lease);
		return rv < 0 ? rv : -EIO;
	}
	if (c->shared && (rv = slot_take(c, e, lease, stale, err, errlen)) != 0) {
		etcd_lease_revoke(e, lease);
		return rv;
	}
	*ret_lease = lease;
	return 0;
}

static void *keepalive_main(void *arg)
{
	struct cluster *c = arg;
	int64_t lease, fresh, revoked = 0, ttl;
	uint64_t sent;
	bool fenced;
	char err[256];
	int rv;

	for (;;) {
		pthread_mutex_lock(&c->mu);
		lease = c->lease;
		fenced = c->fenced;
		pthread_mutex_unlock(&c->mu);
		sent = now_ms();
		if (fenced) {
			/* invariant 3: the abandoned lease goes first (its owner keys
			 * with it), then a new one; tenants come back one by one */
			if (revoked != lease && etcd_lease_revoke(c->ka, lease) >= 0)
				revoked = lease;
			if ((rv = node_register(c, c->ka, lease, &fresh, err, sizeof(err))) == 0) {
				pthread_mutex_lock(&c->mu);
				c->lease = fresh;
				c->gen++;
				c->fenced = false;
				atomic_store(&c->last_ok_sent_ms, sent);
				atomic_store(&c->fenced_flag, false);
				pthread_mutex_unlock(&c->mu);
				klog(LOG_NOTICE,
				     "cluster: node %s registered again (lease %" PRIx64 ")",
				     c->node, (uint64_t)fresh);
			} else {
				static struct klog_limit lim;
				klog_limited(&lim, 10000, LOG_WARNING, "cluster: %s", err);
			}
		} else {
			rv = etcd_lease_keepalive(c->ka, lease, &ttl);
			if (rv == 0) {
				atomic_store(&c->last_ok_sent_ms, sent);
			} else if (rv == ETCD_LEASE_GONE) {
				fence(c, "etcd says its lease is gone");
			} else {
				static struct klog_limit lim;
				klog_limited(&lim, 10000, LOG_WARNING, "cluster: keepalive: %s",
				             etcd_errmsg(c->ka));
				if (!cluster_may_write(c))
					fence(c,
					      "no keepalive confirmed within lease_ttl - margin");
			}
		}
		pthread_mutex_lock(&c->wait_mu);
		while (!c->quit) {
			uint64_t until = sent + (uint64_t)c->interval_ms;
			struct timespec ts;
			if (now_ms() >= until)
				break;
			if (!cluster_may_write(c) && !atomic_load(&c->fenced_flag)) {
				pthread_mutex_unlock(&c->wait_mu);
				fence(c, "no keepalive confirmed within lease_ttl - margin");
				pthread_mutex_lock(&c->wait_mu);
				break;
			}
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 50 * 1000000L; /* wakes to fence on time */
			if (ts.tv_nsec >= 1000000000L)
				ts.tv_sec++, ts.tv_nsec -= 1000000000L;
			pthread_cond_timedwait(&c->wait_cv, &c->wait_mu, &ts);
		}
		rv = c->quit;
		pthread_mutex_unlock(&c->wait_mu);
		if (rv)
			return NULL;
	}
}

/* ---- start and stop ----------------------------------------------------- */

static int failover_take(void *arg, const char *name, uint64_t orphan_ms);

/* The first kv+tcp:// listener, when its host is one clients can dial. */
static int default_advertise(const struct kvd_config *cfg, char *buf, size_t len)
{
	for (int i = 0; i < cfg->nlisten; i++) {
		const char *u = cfg->listen[i];
		if (strncmp(u, "kv+tcp://", 9) != 0)
			continue;
		if (strncmp(u + 9, "0.0.0.0:", 8) == 0 || strncmp(u + 9, "[::]:", 5) == 0 ||
		    u[9] == ':' || u[9] == '*')
			return -EINVAL;
		if ((size_t)snprintf(buf, len, "%s", u) >= len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

/* Stops the failover and keepalive threads (those that run). */
static void cluster_threads_stop(struct cluster *c)
{
	failover_stop(c->fo);
	c->fo = NULL;
	if (c->running) {
		pthread_mutex_lock(&c->wait_mu);
		c->quit = true;
		pthread_cond_signal(&c->wait_cv);
		pthread_mutex_unlock(&c->wait_mu);
		pthread_join(c->thread, NULL);
		c->running = false;
	}
}

void cluster_store_closing(struct kvd *d)
{
	struct cluster *c = d->cluster;

	if (c == NULL)
		return;
	failover_stop(c->fo);
	c->fo = NULL;
	pthread_mutex_lock(&c->store_mu);
	c->store_open = false;
	pthread_mutex_unlock(&c->store_mu);
}

static void cluster_free(struct cluster *c)
{
	if (c == NULL)
		return;
	owned_clear(c);
	seen_clear(c);
	etcd_close(c->op);
	etcd_close(c->ka);
	pthread_mutex_destroy(&c->claim_mu);
	pthread_mutex_destroy(&c->store_mu);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->op_mu);
	pthread_mutex_destroy(&c->wait_mu);
	pthread_cond_destroy(&c->wait_cv);
	free(c);
}

int cluster_start(struct kvd *d, char *err, size_t errlen)
{
	const struct kvd_config *cfg = &d->cfg;
	struct cluster *c;
	pthread_condattr_t ca;
	int64_t call_ms;
	int rv;

	d->cluster = NULL;
	if (cfg->etcd[0] == '\0') {
		if (d->store != NULL && kv_store_shared(d->store)) {
			snprintf(err, errlen,
			         "device %s is shared by several nodes (kvd --format --nodes): it "
			         "needs etcd and cluster, which say which node writes which tenant "
			         "(docs/SCALEOUT.md)",
			         cfg->device);
			return -EINVAL;
		}
		return 0;
	}
	if (!id_valid(cfg->cluster)) {
		snprintf(err, errlen, "cluster '%s': 1-64 characters of [A-Za-z0-9._-]",
		         cfg->cluster);
		return -EINVAL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->d = d;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->op_mu, NULL);
	pthread_mutex_init(&c->claim_mu, NULL);
	pthread_mutex_init(&c->store_mu, NULL);
	pthread_mutex_init(&c->wait_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->wait_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (cfg->node_id[0] != '\0')
		snprintf(c->node, sizeof(c->node), "%s", cfg->node_id);
	else if (gethostname(c->node, sizeof(c->node)) != 0)
		c->node[0] = '\0';
	c->node[sizeof(c->node) - 1] = '\0';
	rv = -EINVAL;
	if (!id_valid(c->node)) {
		snprintf(err, errlen,
		         "node_id '%s': 1-64 characters of [A-Za-z0-9._-] (the default is the "
		         "host name)",
		         c->node);
		goto fail;
	}
	if (cfg->advertise[0] != '\0') {
		if (strncmp(cfg->advertise, "kv+", 3) != 0 &&
		    strncmp(cfg->advertise, "tcp://", 6) != 0 &&
		    strncmp(cfg->advertise, "tls+tcp://", 10) != 0) {
			snprintf(err, errlen,
			         "advertise '%s': a client endpoint (kv+tcp://HOST:PORT)",
			         cfg->advertise);
			goto fail;
		}
		snprintf(c->addr, sizeof(c->addr), "%s", cfg->advertise);
	} else if (default_advertise(cfg, c->addr, sizeof(c->addr)) != 0) {
		snprintf(err, errlen,
		         "advertise: set it (no kv+tcp:// listener with a host clients "
		         "can dial)");
		goto fail;
	}
	if (strchr(c->addr, ' ') != NULL) {
		snprintf(err, errlen, "advertise '%s' holds a space", c->addr);
		goto fail;
	}
	snprintf(c->value, sizeof(c->value), "%s %s", c->node, c->addr);
	snprintf(c->prefix, sizeof(c->prefix), "/kvd/%s/", cfg->cluster);
	c->ttl_ms = (int64_t)cfg->lease_ttl_s * 1000;
	c->margin_ms = c->ttl_ms / 5 > CLUSTER_MARGIN_MIN ? c->ttl_ms / 5 : CLUSTER_MARGIN_MIN;
	c->interval_ms = c->ttl_ms / 3;
	call_ms = c->ttl_ms / 2 < CLUSTER_CALL_MAX_MS ? c->ttl_ms / 2 : CLUSTER_CALL_MAX_MS;
	if ((rv = etcd_open(cfg->etcd, (int)call_ms, &c->op)) != 0 ||
	    (rv = etcd_open(cfg->etcd, (int)c->interval_ms, &c->ka)) != 0) {
		snprintf(err, errlen, "etcd '%s': %s", cfg->etcd,
		         rv == -EINVAL ? "a comma-separated list of http:// or https:// URLs"
		                       : strerror(-rv));
		goto fail;
	}
	if (d->store != NULL && kv_store_shared(d->store)) {
		struct kv_store_stats st;
		kv_store_stats(d->store, &st);
		c->shared = true;
		c->store_open = true;
		c->device_node = st.device_node != 0 ? st.device_node : cfg->device_node;
	}
	atomic_store(&c->last_ok_sent_ms, now_ms());
	if ((rv = node_register(c, c->op, 0, &c->lease, err, errlen)) != 0)
		goto fail;
	c->gen = 1;
	if ((rv = -pthread_create(&c->thread, NULL, keepalive_main, c)) != 0) {
		snprintf(err, errlen, "cannot start the keepalive thread: %s", strerror(-rv));
		etcd_lease_revoke(c->op, c->lease);
		goto fail;
	}
	c->running = true;
	if (c->shared) {
		struct failover_conf fc = {
		        .etcd = cfg->etcd,
		        .call_ms = (int)call_ms,
		        .prefix = c->prefix,
		        .node = c->node,
		        .interval_ms = c->interval_ms,
		        .grace_ms = c->margin_ms,
		        .store = d->store,
		        .take = failover_take,
		        .arg = c,
		};
		if ((rv = failover_start(&fc, &c->fo, err, errlen)) != 0) {
			cluster_threads_stop(c);
			etcd_lease_revoke(c->op, c->lease);
			goto fail;
		}
	}
	d->cluster = c;
	d->lim.owners = cluster_owners; /* TenantList shows them */
	d->lim.owners_arg = c;
	klog(LOG_INFO,
	     "cluster %s: node %s at %s, lease %" PRIx64 " (%" PRId64 " s; fenced %" PRId64
	     " ms after a keepalive sent)",
	     cfg->cluster, c->node, c->addr, (uint64_t)c->lease, c->ttl_ms / 1000,
	     c->ttl_ms - c->margin_ms);
	return 0;
fail:
	cluster_free(c);
	return rv;
}

void cluster_stop(struct kvd *d)
{
	struct cluster *c = d->cluster;
	int rv;

	if (c == NULL)
		return;
	cluster_threads_stop(c);
	/* a clean stop lets every tenant go at once */
	if ((rv = etcd_lease_revoke(c->op, c->lease)) < 0)
		klog(LOG_WARNING,
		     "cluster: revoking lease %" PRIx64 ": %s (its tenants go when it ends)",
		     (uint64_t)c->lease, etcd_errmsg(c->op));
	d->cluster = NULL;
	d->lim.owners = NULL;
	d->lim.owners_arg = NULL;
	cluster_free(c);
}

/* ---- ownership ----------------------------------------------------------- */

/* What claim() found. */
struct claim {
	int64_t epoch;
	char node[65]; /* another owner's */
	char addr[256];
};

enum { CLAIM_OURS, CLAIM_OTHER, CLAIM_NONE };

/* Takes `name` with put-if-absent on the node's lease (adopt or first use),
 * or with take false only looks its owner up: CLAIM_OURS (ret->epoch; the
 * tenant is in `owned`), CLAIM_OTHER (ret: the owner), CLAIM_NONE (take
 * false: no owner), or -errno with msg saying why. */
static int claim(struct cluster *c, const char *name, bool take, struct claim *ret, char *msg,
                 size_t mlen)
{
	char key[256];
	struct etcd_kv cur = {0};
	int64_t lease, rev;
	uint64_t gen;
	int rv, klen;

	if ((klen = key_of(c, "tenants", name, "/owner", key, sizeof(key))) < 0)
		return klen;
	pthread_mutex_lock(&c->mu);
	lease = c->lease;
	gen = c->gen;
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_lock(&c->op_mu);
	for (int tries = 0;; tries++) {
		if (take)
			rv = etcd_put_if_absent(c->op, key, (size_t)klen, c->value,
			                        strlen(c->value), lease, &rev, &cur);
		else
			rv = etcd_get(c->op, key, (size_t)klen, &cur, NULL);
		if (rv == 0 && take) {
			ret->epoch = rev;
			rv = CLAIM_OURS;
			break;
		}
		if (rv == ETCD_ABSENT) {
			rv = CLAIM_NONE;
			break;
		}
		if (rv < 0) {
			snprintf(msg, mlen, "tenant '%s': etcd cannot be asked who owns it: %s",
			         name, etcd_errmsg(c->op));
			if (rv == -ENOENT)
				fence(c, "etcd does not know its lease");
			break;
		}
		/* it exists: ours on this lease, ours on an older one, or another's */
		if (!owner_split(&cur, ret->node, sizeof(ret->node), ret->addr,
		                 sizeof(ret->addr))) {
			snprintf(msg, mlen, "tenant '%s': its owner key in etcd holds junk", name);
			etcd_kv_clear(&cur);
			rv = -EPROTO;
			break;
		}
		if (strcmp(ret->node, c->node) != 0) {
			ret->epoch = cur.create_rev;
			rv = CLAIM_OTHER;
			break;
		}
		if (cur.lease == lease) {
			ret->epoch = cur.create_rev;
			rv = CLAIM_OURS;
			break;
		}
		/* invariant 4: our own key of a lease we abandoned */
		if (!take || tries > 0) {
			snprintf(msg, mlen, "tenant '%s': held by this node's old lease", name);
			rv = -EAGAIN;
			break;
		}
		rv = etcd_delete_if_mod(c->op, key, (size_t)klen, cur.mod_rev);
		etcd_kv_clear(&cur);
		if (rv < 0) {
			snprintf(msg, mlen, "tenant '%s': etcd: %s", name, etcd_errmsg(c->op));
			break;
		}
	}
	etcd_kv_clear(&cur);
	pthread_mutex_unlock(&c->op_mu);
	if (rv == CLAIM_OURS) {
		pthread_mutex_lock(&c->mu);
		if (c->gen != gen || c->fenced) {
			/* fenced meanwhile: the key went (or goes) with that lease */
			snprintf(msg, mlen, "node %s is fenced", c->node);
			rv = -ESTALE;
		} else {
			struct owned *o = owned_find(c, name);
			if (o == NULL && (o = calloc(1, sizeof(*o))) != NULL) {
				unsigned b = bucket(name);
				snprintf(o->name, sizeof(o->name), "%s", name);
				o->next = c->owned[b];
				c->owned[b] = o;
			}
			if (o == NULL) {
				snprintf(msg, mlen, "out of memory");
				rv = -ENOMEM;
			} else {
				if (o->epoch != ret->epoch || o->gen != gen)
					o->claimed = false; /* invariant 6: the engine next */
				o->epoch = ret->epoch;
				o->gen = gen;
				seen_forget(c, name);
			}
		}
		pthread_mutex_unlock(&c->mu);
		if (rv == CLAIM_OURS)
			klog(LOG_INFO, "cluster: tenant %s owned by node %s, epoch %" PRId64, name,
			     c->node, ret->epoch);
	} else if (rv == CLAIM_OTHER) {
		pthread_mutex_lock(&c->mu);
		seen_put(c, name, ret->node, ret->addr, ret->epoch);
		pthread_mutex_unlock(&c->mu);
	}
	return rv;
}

/* Invariant 6: on a shared device, makes the engine write `name` under
 * `epoch` (claim() put it in `owned` at that epoch), once per epoch. When
 * the engine refuses, the owner key goes again (as a release deletes it)
 * and the tenant leaves `owned`. 0, or -ESTALE (fenced meanwhile, or the
 * device records a newer epoch), -EBUSY, -errno with msg saying why. */
static int device_claim(struct cluster *c, const char *name, int64_t epoch, char *msg, size_t mlen)
{
	char key[256];
	struct owned *o;
	uint64_t gen;
	bool stale = false;
	int rv, klen;

	if (!c->shared)
		return 0;
	pthread_mutex_lock(&c->claim_mu);
	pthread_mutex_lock(&c->mu);
	o = owned_find(c, name);
	gen = c->gen;
	if (o == NULL || o->epoch != epoch || o->gen != gen || c->fenced) {
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->claim_mu);
		snprintf(msg, mlen, "tenant '%s': node %s gave it up meanwhile (fenced)", name,
		         c->node);
		return -ESTALE;
	}
	if (o->claimed) {
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->claim_mu);
		return 0;
	}
	pthread_mutex_unlock(&c->mu);
	rv = kv_store_claim(c->d->store, name, (uint64_t)epoch);
	pthread_mutex_lock(&c->mu);
	o = owned_find(c, name);
	if (o == NULL || o->epoch != epoch || o->gen != gen || c->gen != gen || c->fenced) {
		stale = rv == 0; /* fenced while the engine took it: given up again */
		if (rv == 0)
			rv = -ESTALE;
	} else if (rv == 0) {
		o->claimed = true;
	} else {
		owned_remove(c, name);
	}
	pthread_mutex_unlock(&c->mu);
	if (stale)
		kv_store_disown(c->d->store, name);
	pthread_mutex_unlock(&c->claim_mu);
	if (rv == 0)
		return 0;
	snprintf(msg, mlen,
	         "tenant '%s': the shared device cannot be taken at epoch %" PRId64 ": %s", name,
	         epoch,
	         rv == -ESTALE ? "it records a newer owner (or this node was fenced)"
	                       : kv_strerror(rv));
	if (!stale && (klen = key_of(c, "tenants", name, "/owner", key, sizeof(key))) > 0) {
		int drv;
		pthread_mutex_lock(&c->op_mu);
		drv = etcd_delete_if_value(c->op, key, (size_t)klen, c->value, strlen(c->value));
		pthread_mutex_unlock(&c->op_mu);
		if (drv < 0)
			klog(LOG_WARNING,
			     "cluster: tenant %s: its owner key stays until the lease ends: %s",
			     name, etcd_errmsg(c->op));
	}
	klog(LOG_WARNING, "cluster: %s", msg);
	return rv;
}

/* failover.c's take (invariant 8): `name` has had no owner for orphan_ms
 * and this node won it; taken as TenantAdopt takes a tenant. 0 taken, or
 * -EEXIST (another node has it now), -ESTALE (fenced), -errno. */
static int failover_take(void *arg, const char *name, uint64_t orphan_ms)
{
	struct cluster *c = arg;
	struct claim o = {0};
	char msg[512];
	int rv;

	if (!cluster_may_write(c))
		return -ESTALE;
	rv = claim(c, name, true, &o, msg, sizeof(msg));
	if (rv == CLAIM_OTHER || rv == CLAIM_NONE)
		return -EEXIST;
	if (rv != CLAIM_OURS) {
		klog(LOG_WARNING, "cluster: failover of tenant %s: %s", name, msg);
		return rv;
	}
	if ((rv = device_claim(c, name, o.epoch, msg, sizeof(msg))) != 0)
		return rv;
	klog(LOG_NOTICE,
	     "cluster: node %s took tenant %s over, epoch %" PRId64 ", %" PRIu64
	     " ms after it was first seen without a live owner",
	     c->node, name, o.epoch, orphan_ms);
	return 0;
}

bool cluster_serves(struct cluster *c, const char *tenant)
{
	struct owned *o;
	bool yes;

	if (c == NULL)
		return true;
	pthread_mutex_lock(&c->mu);
	o = owned_find(c, tenant);
	yes = o != NULL && o->gen == c->gen && !c->fenced && (o->claimed || !c->shared);
	pthread_mutex_unlock(&c->mu);
	return yes;
}

uint64_t cluster_serving_epoch(struct cluster *c, const char *tenant)
{
	struct owned *o;
	uint64_t epoch = 0;

	if (c == NULL)
		return 1;
	pthread_mutex_lock(&c->mu);
	o = owned_find(c, tenant);
	if (o != NULL && o->gen == c->gen && !c->fenced && (o->claimed || !c->shared))
		epoch = (uint64_t)o->epoch;
	pthread_mutex_unlock(&c->mu);
	return epoch;
}

uint64_t cluster_failover_adoptions(const struct cluster *c)
{
	return c != NULL ? failover_adoptions(c->fo) : 0;
}

/* ---- TenantList's owners --------------------------------------------------- */

static int rpc_owner_cmp(const void *a, const void *b)
{
	return strcmp(((const struct rpc_owner *)a)->tenant, ((const struct rpc_owner *)b)->tenant);
}

int cluster_owners(void *arg, struct rpc_owner **ret, size_t *ret_n)
{
	struct cluster *c = arg;
	char prefix[160];
	struct etcd_kvs kvs = {0};
	struct rpc_owner *o;
	size_t n = 0, plen;
	int rv;

	plen = (size_t)snprintf(prefix, sizeof(prefix), "%stenants/", c->prefix);
	pthread_mutex_lock(&c->op_mu);
	rv = etcd_list(c->op, prefix, plen, 0, 0, &kvs);
	pthread_mutex_unlock(&c->op_mu);
	if (rv != 0)
		return rv < 0 ? rv : -EIO;
	if ((o = calloc(kvs.n != 0 ? kvs.n : 1, sizeof(*o))) == NULL) {
		etcd_kvs_free(&kvs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < kvs.n; i++) {
		const struct etcd_kv *kv = &kvs.kv[i];
		const char *name = kv->key + plen, *slash;
		char addr[256];
		/* "<name>/owner"; anything else under the prefix is not ours to show */
		if (kv->key_len <= plen || (slash = strchr(name, '/')) == NULL ||
		    strcmp(slash, "/owner") != 0 || (size_t)(slash - name) >= sizeof(o[n].tenant) ||
		    !owner_split(kv, o[n].node, sizeof(o[n].node), addr, sizeof(addr)))
			continue;
		memcpy(o[n].tenant, name, (size_t)(slash - name));
		o[n].epoch = (uint64_t)kv->create_rev;
		n++;
	}
	etcd_kvs_free(&kvs);
	qsort(o, n, sizeof(*o), rpc_owner_cmp);
	*ret = o;
	*ret_n = n;
	return 0;
}

/* ---- requests ------------------------------------------------------------- */

static void reply_moved(struct job *j, const char *tenant, const struct claim *o)
{
	struct rpc_reply rp;
	char msg[512];

	snprintf(msg, sizeof(msg), "tenant '%s' is served by node %s at %s", tenant, o->node,
	         o->addr);
	rpc_reply_init(&rp);
	rpc_reply_moved(&rp, j->req.id, msg, o->node, o->addr, (uint64_t)o->epoch);
	job_reply(j, &rp);
}

static void reply_fenced(struct cluster *c, struct job *j)
{
	char msg[200];

	snprintf(msg, sizeof(msg),
	         "node %s is fenced: its etcd lease is not confirmed; its tenants are taken "
	         "again once etcd answers",
	         c->node);
	job_reply_error(j, j->req.id, RPC_UNAVAILABLE, msg);
}

static void adopt(struct cluster *c, struct job *j)
{
	const char *name = j->req.tenant;
	struct claim o = {0};
	struct rpc_reply rp;
	char msg[512];
	int rv;

	if (!cluster_may_write(c)) {
		reply_fenced(c, j);
		return;
	}
	rv = claim(c, name, true, &o, msg, sizeof(msg));
	if (rv == CLAIM_OTHER) {
		snprintf(msg, sizeof(msg),
		         "tenant '%s' is owned by node %s (%s) while its lease lives: release it "
		         "there first",
		         name, o.node, o.addr);
		job_reply_error(j, j->req.id, RPC_FAILED_PRECONDITION, msg);
		return;
	}
	if (rv == CLAIM_OURS && (rv = device_claim(c, name, o.epoch, msg, sizeof(msg))) == 0)
		rv = CLAIM_OURS;
	if (rv != CLAIM_OURS) {
		job_reply_error(j, j->req.id,
		                rv == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_UNAVAILABLE, msg);
		return;
	}
	rpc_reply_init(&rp);
	rpc_reply_ok(&rp, j->req.id, 4);
	mp_kv_str(&rp.pk, WIRE_F_NAME, name);
	mp_kv_str(&rp.pk, WIRE_F_NODE, c->node);
	mp_kv_str(&rp.pk, WIRE_F_ADDRESS, c->addr);
	mp_kv_uint(&rp.pk, WIRE_F_EPOCH, (uint64_t)o.epoch);
	job_reply(j, &rp);
}

/* Whether the request works on its tenant (r->tenant). */
static bool on_tenant(const struct rpc_req *r)
{
	switch (r->method) {
	case RPC_TENANT_LIST:
	case RPC_HEALTH:
		return false;
	case RPC_STATS:
		return r->kind != RPC_KIND_LOCAL; /* scope daemon is local */
	default:
		return true;
	}
}

bool cluster_gate(struct kvd *d, struct job *j)
{
	struct cluster *c = d->cluster;
	const struct rpc_req *r = &j->req;
	struct owned *own;
	struct claim o = {0};
	struct kv_tenant_info info;
	struct kv_dev_tenant dt;
	char msg[512];
	bool take;
	int rv;

	if (c == NULL) {
		if (r->method != RPC_TENANT_ADOPT && r->method != RPC_TENANT_RELEASE)
			return false;
		job_reply_error(
		        j, r->id, RPC_FAILED_PRECONDITION,
		        "kvd runs as a single node (no etcd setting): no tenant to adopt or "
		        "release");
		return true;
	}
	if (!on_tenant(r))
		return false;
	if (!cluster_may_write(c)) {
		if (!atomic_load(&c->fenced_flag))
			fence(c, "no keepalive confirmed within lease_ttl - margin");
		reply_fenced(c, j);
		return true;
	}
	if (r->method == RPC_TENANT_ADOPT) {
		adopt(c, j);
		return true;
	}
	pthread_mutex_lock(&c->mu);
	own = owned_find(c, r->tenant);
	if (own != NULL && own->gen == c->gen && !c->fenced && (own->claimed || !c->shared)) {
		if (own->releasing > now_ms()) {
			pthread_mutex_unlock(&c->mu);
			snprintf(msg, sizeof(msg), "tenant '%s' is being released", r->tenant);
			job_reply_error(j, r->id, RPC_UNAVAILABLE, msg);
			return true;
		}
		if (r->method == RPC_TENANT_RELEASE)
			own->releasing = now_ms() + CLUSTER_RELEASE_MS;
		pthread_mutex_unlock(&c->mu);
		return false;
	}
	if (r->method != RPC_TENANT_RELEASE) {
		struct seen *s = seen_find(c, r->tenant, now_ms());
		if (s != NULL) {
			snprintf(o.node, sizeof(o.node), "%s", s->node);
			snprintf(o.addr, sizeof(o.addr), "%s", s->addr);
			o.epoch = s->epoch;
			pthread_mutex_unlock(&c->mu);
			reply_moved(j, r->tenant, &o);
			return true;
		}
	}
	pthread_mutex_unlock(&c->mu);
	/* not owned here: take it on first use, or find who has it. Only a
	 * tenant that exists here (or that the request creates) is taken: a
	 * request for a name nobody has leaves no owner key behind (on a
	 * shared device: that exists on the device, whichever node wrote it).
	 * A release only looks. */
	take = r->method != RPC_TENANT_RELEASE &&
	       (r->method == RPC_TENANT_CREATE || d->cfg.auto_create ||
	        (c->shared ? kv_store_device_find(d->store, r->tenant, &dt)
	                   : kv_store_info(d->store, r->tenant, &info)) != -ENOENT);
	rv = claim(c, r->tenant, take, &o, msg, sizeof(msg));
	if (rv == CLAIM_OURS && r->method != RPC_TENANT_RELEASE &&
	    (rv = device_claim(c, r->tenant, o.epoch, msg, sizeof(msg))) == 0)
		rv = CLAIM_OURS;
	switch (rv) {
	case CLAIM_OURS:
		if (r->method == RPC_TENANT_RELEASE) {
			/* ours in etcd, not served here: this node's older lease */
			snprintf(msg, sizeof(msg), "tenant '%s' is not served by this node",
			         r->tenant);
			job_reply_error(j, r->id, RPC_FAILED_PRECONDITION, msg);
			return true;
		}
		return false;
	case CLAIM_OTHER:
		reply_moved(j, r->tenant, &o);
		return true;
	case CLAIM_NONE:
		if (r->method != RPC_TENANT_RELEASE)
			return false; /* nobody has it, nor this node: its NOT_FOUND */
		snprintf(msg, sizeof(msg), "tenant '%s' has no owner to release it", r->tenant);
		job_reply_error(j, r->id, RPC_FAILED_PRECONDITION, msg);
		return true;
	default:
		if (rv == -ESTALE && atomic_load(&c->fenced_flag))
			reply_fenced(c, j);
		else
			job_reply_error(j, r->id,
			                rv == -ENOMEM ? RPC_RESOURCE_EXHAUSTED : RPC_UNAVAILABLE,
			                msg);
		return true;
	}
}

void cluster_release_undo(struct kvd *d, const struct rpc_req *r)
{
	struct cluster *c = d->cluster;
	struct owned *o;

	if (c == NULL || r->method != RPC_TENANT_RELEASE)
		return;
	pthread_mutex_lock(&c->mu);
	if ((o = owned_find(c, r->tenant)) != NULL)
		o->releasing = 0;
	pthread_mutex_unlock(&c->mu);
}

void cluster_tenant_done(struct kvd *d, const struct rpc_req *r, struct rpc_reply *rp)
{
	struct cluster *c = d->cluster;
	char key[256], msg[512];
	struct owned *o;
	int rv, klen;

	if (c == NULL || (r->method != RPC_TENANT_RELEASE && r->method != RPC_TENANT_DROP))
		return;
	if (rp->status != RPC_OK) {
		cluster_release_undo(d, r);
		return;
	}
	if ((klen = key_of(c, "tenants", r->tenant, "/owner", key, sizeof(key))) < 0)
		return;
	/* invariant 7: the device is told before another node can take it */
	if (c->shared && r->method == RPC_TENANT_RELEASE) {
		if ((rv = kv_store_disown(d->store, r->tenant)) != 0) {
			snprintf(msg, sizeof(msg),
			         "tenant '%s' is passive but the shared device still has it: %s",
			         r->tenant, kv_strerror(rv));
			cluster_release_undo(d, r);
			rpc_reply_error(rp, r->id, RPC_UNAVAILABLE, msg);
			return;
		}
		pthread_mutex_lock(&c->mu);
		if ((o = owned_find(c, r->tenant)) != NULL)
			o->claimed = false; /* should the delete fail: claimed again first */
		pthread_mutex_unlock(&c->mu);
	}
	/* invariant 4: only the key whose value is ours */
	pthread_mutex_lock(&c->op_mu);
	rv = etcd_delete_if_value(c->op, key, (size_t)klen, c->value, strlen(c->value));
	if (rv < 0)
		snprintf(msg, sizeof(msg), "tenant '%s' is passive but still owned here: etcd: %s",
		         r->tenant, etcd_errmsg(c->op));
	pthread_mutex_unlock(&c->op_mu);
	pthread_mutex_lock(&c->mu);
	if (rv < 0) {
		if ((o = owned_find(c, r->tenant)) != NULL)
			o->releasing = 0;
	} else {
		owned_remove(c, r->tenant);
	}
	pthread_mutex_unlock(&c->mu);
	if (rv < 0) {
		rpc_reply_error(rp, r->id, RPC_UNAVAILABLE, msg);
		return;
	}
	klog(LOG_INFO, "cluster: tenant %s released by node %s", r->tenant, c->node);
}
