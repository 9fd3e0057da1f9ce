/*
 * failover.c — takes over the tenants of a shared device whose owner node
 * is gone (failover.h says how they are found and who takes them).
 *
 * What it owns: its thread, its etcd connection, and the table of tenants
 * seen orphaned (name -> when first seen so, in this thread's clock),
 * rebuilt each look from what is orphaned now: a tenant that has an owner
 * or a live node again, even for one look, starts its grace period anew.
 *
 * Invariants:
 *   1. A tenant is taken only after it was seen orphaned on every look for
 *      at least grace_ms: its old owner's lease ended (its owner key and
 *      slot key went with it) and that node had fenced itself margin
 *      before that (cluster.c, invariant 2).
 *   2. Only the rendezvous winner among the live nodes (the slot keys'
 *      values, this node among them) takes a tenant; the others leave it.
 *   3. A look that cannot read all three lists takes nothing, and every
 *      grace period starts again (as it does while this node holds no slot:
 *      fenced, not registered).
 *
 * Threads: failover_start and failover_stop on the main thread; the rest
 * on the failover thread; failover_adoptions anywhere.
 */
#include "failover.h"

#include "etcd.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define FAILOVER_NAME_MAX (KV_TENANT_NAME_MAX + 1)

struct orphan {
	char name[FAILOVER_NAME_MAX];
	uint64_t since_ms; /* first seen orphaned (monotonic) */
};

struct failover {
	struct failover_conf conf;
	char prefix[128];
	char node[65];
	struct etcd *e;

	struct orphan *orphans; /* sorted by name */
	size_t norphans;

	_Atomic uint64_t adoptions;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

size_t failover_winner(const char *tenant, const char *const *nodes, size_t n)
{
	size_t best = 0, tlen = strlen(tenant);
	uint64_t best_h = 0;

	char buf[FAILOVER_NAME_MAX + 65];

	if (tlen >= FAILOVER_NAME_MAX)
		tlen = FAILOVER_NAME_MAX - 1;
	memcpy(buf, tenant, tlen);
	buf[tlen] = '\0'; /* with its NUL: "a"+"bc" != "ab"+"c" */
	for (size_t i = 0; i < n; i++) {
		size_t nlen = strnlen(nodes[i], 64);
		uint64_t h;
		memcpy(buf + tlen + 1, nodes[i], nlen);
		h = XXH64(buf, tlen + 1 + nlen, 0);
		if (i == 0 || h > best_h || (h == best_h && strcmp(nodes[i], nodes[best]) < 0)) {
			best = i;
			best_h = h;
		}
	}
	return best;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int orphan_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct orphan *)elem)->name);
}

/* The last path part after `plen` bytes of key, up to `suffix` (which must
 * end it; "" for none): a NUL-terminated copy in out, or false. */
static bool key_part(const struct etcd_kv *kv, size_t plen, const char *suffix, char *out,
                     size_t cap)
{
	size_t slen = strlen(suffix), n;

	if (kv->key_len <= plen + slen)
		return false;
	n = kv->key_len - plen - slen;
	if (n >= cap || memcmp(kv->key + plen + n, suffix, slen) != 0 ||
	    memchr(kv->key + plen, '/', n) != NULL)
		return false;
	memcpy(out, kv->key + plen, n);
	out[n] = '\0';
	return true;
}

/* One look (invariants 1-3). */
static void look(struct failover *f)
{
	static struct klog_limit lim;
	char prefix[192], (*owners)[FAILOVER_NAME_MAX] = NULL;
	char *slot_node[KV_DEV_NODES_MAX + 1] = {0};
	const char *live[KV_DEV_NODES_MAX];
	struct etcd_kvs slots = {0}, tenants = {0};
	struct kv_dev_tenant *dev = NULL;
	struct orphan *next = NULL;
	size_t ndev = 0, nowners = 0, nlive = 0, nnext = 0, plen;
	uint64_t now;
	bool me_live = false, done = false;
	int rv;

	plen = (size_t)snprintf(prefix, sizeof(prefix), "%sslots/", f->prefix);
	if ((rv = etcd_list(f->e, prefix, plen, 0, 0, &slots)) != 0) {
		klog_limited(&lim, 10000, LOG_WARNING, "failover: etcd: listing slots: %s",
		             etcd_errmsg(f->e));
		goto out;
	}
	for (size_t i = 0; i < slots.n; i++) {
		char num[16], *end;
		unsigned long k;
		if (!key_part(&slots.kv[i], plen, "", num, sizeof(num)))
			continue;
		k = strtoul(num, &end, 10);
		if (*end != '\0' || k < 1 || k > KV_DEV_NODES_MAX || slots.kv[i].value_len == 0 ||
		    memchr(slots.kv[i].value, '\0', slots.kv[i].value_len) != NULL)
			continue;
		slot_node[k] = slots.kv[i].value;
		live[nlive++] = slots.kv[i].value;
		if (strcmp(slots.kv[i].value, f->node) == 0)
			me_live = true;
	}
	if (!me_live) /* this node is not registered now (fenced): not its turn */
		goto out;
	qsort(live, nlive, sizeof(live[0]), str_cmp);

	plen = (size_t)snprintf(prefix, sizeof(prefix), "%stenants/", f->prefix);
	if ((rv = etcd_list(f->e, prefix, plen, 0, 0, &tenants)) != 0) {
		klog_limited(&lim, 10000, LOG_WARNING, "failover: etcd: listing owners: %s",
		             etcd_errmsg(f->e));
		goto out;
	}
	if ((owners = calloc(tenants.n + 1, sizeof(*owners))) == NULL)
		goto out;
	for (size_t i = 0; i < tenants.n; i++)
		if (key_part(&tenants.kv[i], plen, "/owner", owners[nowners], sizeof(owners[0])))
			nowners++;
	qsort(owners, nowners, sizeof(owners[0]), name_cmp);

	if ((rv = kv_store_device_tenants(f->conf.store, &dev, &ndev)) != 0) {
		klog_limited(&lim, 10000, LOG_WARNING, "failover: reading the device's tenants: %s",
		             kv_strerror(rv));
		goto out;
	}
	if ((next = calloc(ndev + 1, sizeof(*next))) == NULL)
		goto out;
	now = mono_ms();
	for (size_t i = 0; i < ndev; i++) {
		const struct kv_dev_tenant *t = &dev[i];
		const struct orphan *was;
		struct orphan *o;
		if (bsearch(t->name, owners, nowners, sizeof(owners[0]), name_cmp) != NULL)
			continue; /* it has an owner */
		if (t->node >= 1 && t->node <= KV_DEV_NODES_MAX && slot_node[t->node] != NULL)
			continue; /* its node lives: released, or not used since */
		o = &next[nnext++];
		snprintf(o->name, sizeof(o->name), "%s", t->name);
		was = bsearch(t->name, f->orphans, f->norphans, sizeof(*f->orphans), orphan_cmp);
		o->since_ms = was != NULL ? was->since_ms : now;
		if (now - o->since_ms < (uint64_t)f->conf.grace_ms)
			continue;
		if (strcmp(live[failover_winner(t->name, live, nlive)], f->node) != 0)
			continue;
		if (f->conf.take(f->conf.arg, t->name, now - o->since_ms) == 0) {
			atomic_fetch_add(&f->adoptions, 1);
			nnext--; /* it has an owner now */
		}
	}
	/* kv_store_device_tenants sorts by name: next is sorted too */
	free(f->orphans);
	f->orphans = next;
	f->norphans = nnext;
	next = NULL;
	done = true;
out:
	if (!done) { /* invariant 3: the grace periods start again */
		free(f->orphans);
		f->orphans = NULL;
		f->norphans = 0;
	}
	free(next);
	free(dev);
	free(owners);
	etcd_kvs_free(&slots);
	etcd_kvs_free(&tenants);
}

static void *failover_main(void *arg)
{
	struct failover *f = arg;

	for (;;) {
		uint64_t until;
		bool quit;

		look(f);
		until = mono_ms() + (uint64_t)f->conf.interval_ms;
		pthread_mutex_lock(&f->mu);
		while (!f->quit && mono_ms() < until) {
			struct timespec ts;
			uint64_t left = until - mono_ms();
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(left / 1000);
			ts.tv_nsec += (long)(left % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L)
				ts.tv_sec++, ts.tv_nsec -= 1000000000L;
			pthread_cond_timedwait(&f->cv, &f->mu, &ts);
		}
		quit = f->quit;
		pthread_mutex_unlock(&f->mu);
		if (quit)
			return NULL;
	}
}

int failover_start(const struct failover_conf *conf, struct failover **ret, char *err,
                   size_t errlen)
{
	struct failover *f;
	pthread_condattr_t ca;
	int rv;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->conf = *conf;
	snprintf(f->prefix, sizeof(f->prefix), "%s", conf->prefix);
	snprintf(f->node, sizeof(f->node), "%s", conf->node);
	if ((rv = etcd_open(conf->etcd, conf->call_ms, &f->e)) != 0) {
		snprintf(err, errlen, "failover: etcd '%s': %s", conf->etcd, strerror(-rv));
		free(f);
		return rv;
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rv = -pthread_create(&f->thread, NULL, failover_main, f)) != 0) {
		snprintf(err, errlen, "cannot start the failover thread: %s", strerror(-rv));
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
		etcd_close(f->e);
		free(f);
		return rv;
	}
	*ret = f;
	return 0;
}

void failover_stop(struct failover *f)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&f->mu);
	f->quit = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	etcd_close(f->e);
	free(f->orphans);
	free(f);
}

uint64_t failover_adoptions(const struct failover *f)
{
	return f != NULL ? atomic_load(&f->adoptions) : 0;
}
