/*
 * dev_shared.c — a device shared by several kvd nodes (docs/SCALEOUT.md,
 * docs/FORMAT.md "Device layout"): each node keeps its own catalog in its
 * own slot pair and allocates only the extents of its range (extent i
 * belongs to node i % max_nodes + 1); the tenant is the entry with the
 * highest epoch over every node's catalog.
 *
 * Invariants (beside storage_dev.c's):
 *   S1. A node writes only its own slot pair, only extents of its range
 *       (dev_in_range), and only tenants it claimed (dev_tenant.owned):
 *       every change of a tenant checks dev_writable.
 *   S2. A tenant is taken over by copying the newest entry into this
 *       node's catalog under a higher epoch, with nothing appended to the
 *       old owner's extents: its segment that was open keeps an unknown
 *       length (storage_dev.c invariant 5), so recovery seals it where its
 *       records end and the engine starts a new segment in an extent of
 *       this node's range; new blobs are packed into a new AUX extent.
 *   S3. An extent of this node's range that another node's newest entry
 *       names is DEV_FOREIGN here and never allocated. One that stops being
 *       named (the other node merged it away, or dropped the tenant) is
 *       free only dev_storage.grace_ms later, so reads the other node still
 *       had in flight finish first.
 *   S4. The other catalogs are read again before every extent allocation
 *       and every claim, so an extent is never taken that a newer entry
 *       names.
 *   S5. A dropped tenant leaves a tombstone (an entry with id 0 and no
 *       objects) while any other node's catalog still holds an older entry
 *       of its name, so that entry cannot bring it back.
 *   S6. The read cache (dev_cache.h) holds only this node's view: an
 *       extent another node freed may since have been reused by its range
 *       owner, so taking a tenant over drops what the cache holds of every
 *       extent the tenant names before anything of it is read.
 *
 * Threads: as storage_dev.c; catalog reads run without d->mu.
 */
#include "dev_internal.h"

#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t dev_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The other nodes' catalogs, decoded: peer[k-1] is node k's (empty for
 * this node). */
struct peers {
	struct dev_storage *p;
	uint32_t n;
};

static void peers_free(struct peers *ps)
{
	for (uint32_t k = 0; ps->p != NULL && k < ps->n; k++) {
		struct dev_storage *p = &ps->p[k];
		for (size_t i = 0; i < p->ntenants; i++)
			dev_tenant_free(p->tenants[i]);
		free(p->tenants);
		free(p->ext);
	}
	free(ps->p);
	ps->p = NULL;
}

static int peers_load(struct dev_storage *d, struct peers *ps)
{
	uint32_t n = d->sb.max_nodes;
	int rv = 0;

	ps->n = n;
	if ((ps->p = calloc(n, sizeof(*ps->p))) == NULL)
		return -ENOMEM;
	for (uint32_t k = 1; k <= n && rv == 0; k++) {
		struct dev_storage *p = &ps->p[k - 1];
		p->fd = d->fd;
		p->sb = d->sb;
		p->B = d->B;
		p->base.fault = d->base.fault;
		p->node = k;
		if (k == d->node)
			continue;
		if ((p->ext = calloc(d->sb.extent_count, sizeof(*p->ext))) == NULL)
			rv = -ENOMEM;
		else
			rv = dev_cat_load(p, k);
	}
	if (rv != 0)
		peers_free(ps);
	return rv;
}

/* One entry of a tenant name: this node's (p NULL) or a peer's. */
struct entry {
	struct dev_tenant *t;
	struct dev_storage *p;
	uint32_t node;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->t->name, y->t->name);

	if (c != 0)
		return c;
	if (x->t->epoch != y->t->epoch)
		return x->t->epoch > y->t->epoch ? -1 : 1; /* newest first */
	return x->node < y->node ? -1 : x->node > y->node;
}

/* Every entry, this node's (not lost) and the peers', sorted by name,
 * newest first. [d->mu] */
static int entries(struct dev_storage *d, struct peers *ps, struct entry **ret, size_t *ret_n)
{
	size_t n = d->ntenants, k = 0;
	struct entry *v;

	for (uint32_t j = 0; j < ps->n; j++)
		n += ps->p[j].ntenants;
	if ((v = calloc(n ? n : 1, sizeof(*v))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < d->ntenants; i++)
		if (!d->tenants[i]->lost)
			v[k++] = (struct entry){d->tenants[i], NULL, d->node};
	for (uint32_t j = 0; j < ps->n; j++)
		for (size_t i = 0; i < ps->p[j].ntenants; i++)
			v[k++] = (struct entry){ps->p[j].tenants[i], &ps->p[j], j + 1};
	qsort(v, k, sizeof(*v), entry_cmp);
	*ret = v;
	*ret_n = k;
	return 0;
}

/* Calls fn for every extent t names. */
static void each_extent(const struct dev_tenant *t, void (*fn)(void *arg, uint32_t i), void *arg)
{
	for (size_t j = 0; j < t->nsegs; j++)
		fn(arg, t->segs[j]->extent);
	for (size_t j = 0; j < t->nblobs; j++)
		for (uint32_t e = 0; e < t->blobs[j].nexts; e++)
			fn(arg, t->blobs[j].exts[e]);
	if (t->aux != NONE)
		fn(arg, t->aux);
}

struct named {
	uint8_t *v;
	uint32_t n;
	uint8_t mark;
};

static void name_one(void *arg, uint32_t i)
{
	struct named *m = arg;

	if (i < m->n && m->v[i] == 0)
		m->v[i] = m->mark;
}

enum { NAMED_OWN = 1, NAMED_FOREIGN = 2 };

/* Which extents the newest entries name: this node's or another's. The
 * losing entries of this node become lost (not listed, not written, no
 * longer writable). [d->mu] */
static int judge(struct dev_storage *d, struct peers *ps, uint8_t *named)
{
	struct named m = {.v = named, .n = d->sb.extent_count};
	struct entry *v;
	size_t n, i;
	int rv;

	if ((rv = entries(d, ps, &v, &n)) != 0)
		return rv;
	memset(named, 0, d->sb.extent_count);
	for (i = 0; i < n; i++) {
		bool newest = i == 0 || strcmp(v[i - 1].t->name, v[i].t->name) != 0;
		if (!newest) {
			if (v[i].p == NULL) {
				v[i].t->lost = true;
				atomic_store(&v[i].t->owned, false);
				d->changes++;
			}
			continue;
		}
		m.mark = v[i].p == NULL ? NAMED_OWN : NAMED_FOREIGN;
		each_extent(v[i].t, name_one, &m);
	}
	/* a merge output not yet in any catalog is this node's too */
	m.mark = NAMED_OWN;
	for (i = 0; i < d->ntenants; i++)
		if (!d->tenants[i]->lost)
			each_extent(d->tenants[i], name_one, &m);
	/* tombstones no older entry needs any more (S5) */
	for (i = 0; i < n; i++) {
		struct dev_tenant *t = v[i].t;
		bool older = false;
		if (v[i].p != NULL || !t->tomb)
			continue;
		for (size_t j = i + 1; j < n && strcmp(v[j].t->name, t->name) == 0; j++)
			older = true;
		if (!older) {
			t->lost = true; /* not written again */
			d->changes++;
		}
	}
	free(v);
	return 0;
}

/* Whether extent e's mark is stale: a tenant of this node that lost its
 * entry, or `fresh` (just taken over, no handle open) not naming it. */
static bool stale_mark(const struct dev_storage *d, const struct dev_extent *e, uint8_t named,
                       const struct dev_tenant *fresh)
{
	if (e->tenant == 0 || e->tenant == DEV_FOREIGN)
		return false;
	if (fresh != NULL && e->tenant == fresh->id)
		return named != NAMED_OWN;
	for (size_t k = 0; k < d->ntenants; k++)
		if (d->tenants[k]->lost && d->tenants[k]->id == e->tenant) {
			for (size_t j = 0; j < d->ntenants; j++)
				if (!d->tenants[j]->lost && d->tenants[j]->id == e->tenant)
					return named != NAMED_OWN; /* the same id taken over */
			return true;
		}
	return false;
}

/* Marks the extents of this node's range by what the newest entries name
 * (S3); at open (`open`) also every other extent. fresh: a tenant just
 * taken over, whose old marks may name extents it no longer has. [d->mu] */
static void mark(struct dev_storage *d, const uint8_t *named, bool open,
                 const struct dev_tenant *fresh)
{
	uint64_t now = dev_mono_ms();
	bool any_lost = false, lost_id;

	for (size_t k = 0; k < d->ntenants; k++)
		any_lost |= d->tenants[k]->lost;
	for (uint32_t i = 0; i < d->sb.extent_count; i++) {
		struct dev_extent *e = &d->ext[i];
		if (!dev_in_range(d, i)) {
			if (named[i] != NAMED_OWN)
				e->tenant = DEV_FOREIGN; /* another node's to allocate */
			continue;
		}
		lost_id = !open && (any_lost || fresh != NULL) && stale_mark(d, e, named[i], fresh);
		if (named[i] == NAMED_FOREIGN) {
			if (open || e->tenant == 0 || lost_id) {
				e->tenant = DEV_FOREIGN;
				e->pending = false;
			}
		} else if (named[i] == 0 && e->tenant != 0 &&
		           (open || e->tenant == DEV_FOREIGN || lost_id)) {
			/* named by no entry any more: free after the grace period */
			if (open && e->tenant != DEV_FOREIGN)
				d->reclaimed++;
			e->tenant = 0;
			e->kind = DEV_EXT_FREE;
			e->position = 0;
			e->users = 0;
			e->pending = false;
			e->grace_until = now + d->grace_ms;
		}
	}
}

/* Moves every newest entry of the peers into d as it is (a reader of all
 * nodes: kvd --check). [d->mu] */
static int take_all(struct dev_storage *d, struct peers *ps)
{
	struct entry *v;
	size_t n, i;
	int rv;

	if ((rv = entries(d, ps, &v, &n)) != 0)
		return rv;
	for (i = 0; i < n && rv == 0; i++) {
		struct dev_tenant *t = v[i].t;
		struct dev_storage *p = v[i].p;
		if ((i > 0 && strcmp(v[i - 1].t->name, t->name) == 0) || t->tomb)
			continue;
		for (size_t j = 0; j < p->ntenants; j++)
			if (p->tenants[j] == t)
				p->tenants[j] = p->tenants[--p->ntenants];
		if ((rv = dev_tenant_add(d, t)) != 0) {
			dev_tenant_free(t);
			break;
		}
		for (size_t j = 0; j < t->nsegs; j++)
			d->ext[t->segs[j]->extent] = p->ext[t->segs[j]->extent];
		for (size_t j = 0; j < t->nblobs; j++)
			for (uint32_t e = 0; e < t->blobs[j].nexts; e++)
				d->ext[t->blobs[j].exts[e]] = p->ext[t->blobs[j].exts[e]];
		if (t->aux != NONE)
			d->ext[t->aux] = p->ext[t->aux];
	}
	free(v);
	return rv;
}

int dev_shared_open(struct dev_storage *d)
{
	struct peers ps = {0};
	uint8_t *named;
	size_t i;
	int rv;

	if ((named = calloc(d->sb.extent_count, 1)) == NULL)
		return -ENOMEM;
	if ((rv = peers_load(d, &ps)) != 0) {
		free(named);
		return rv;
	}
	pthread_mutex_lock(&d->mu);
	if (d->node == 0) {
		rv = take_all(d, &ps);
	} else if ((rv = judge(d, &ps, named)) == 0) {
		mark(d, named, true, NULL);
		/* entries that lost are gone from this node's catalog (no handle
		 * holds them yet) */
		for (i = 0; i < d->ntenants;) {
			struct dev_tenant *t = d->tenants[i];
			if (t->lost) {
				d->tenants[i] = d->tenants[--d->ntenants];
				dev_tenant_free(t);
			} else {
				i++;
			}
		}
	}
	pthread_mutex_unlock(&d->mu);
	peers_free(&ps);
	free(named);
	return rv;
}

int dev_shared_refresh(struct dev_storage *d)
{
	struct peers ps = {0};
	uint8_t *named;
	int rv;

	if (d->node == 0)
		return -EROFS;
	if ((named = calloc(d->sb.extent_count, 1)) == NULL)
		return -ENOMEM;
	if ((rv = peers_load(d, &ps)) == 0) {
		pthread_mutex_lock(&d->mu);
		if ((rv = judge(d, &ps, named)) == 0)
			mark(d, named, false, NULL);
		pthread_mutex_unlock(&d->mu);
		peers_free(&ps);
	}
	free(named);
	return rv;
}

/* ---- claims ---------------------------------------------------------------- */

static struct dev_claim *claim_find(struct dev_storage *d, const char *name)
{
	for (size_t i = 0; i < d->nclaims; i++)
		if (strcmp(d->claims[i].name, name) == 0)
			return &d->claims[i];
	return NULL;
}

static void claim_forget(struct dev_storage *d, const char *name)
{
	struct dev_claim *c = claim_find(d, name);

	if (c != NULL)
		*c = d->claims[--d->nclaims];
}

/* Removes this node's entries of name that are not t: older ones, lost
 * ones without handles, and tombstones. [d->mu] */
static void drop_others(struct dev_storage *d, const char *name, const struct dev_tenant *t)
{
	for (size_t i = 0; i < d->ntenants;) {
		struct dev_tenant *o = d->tenants[i];
		if (o != t && o->handles == 0 && strcmp(o->name, name) == 0) {
			d->tenants[i] = d->tenants[--d->ntenants];
			dev_tenant_free(o);
			d->changes++;
		} else {
			i++;
		}
	}
}

int dev_shared_tenant_new(struct dev_storage *d, const char *name, struct dev_tenant **ret)
{
	struct dev_claim *c = claim_find(d, name);
	struct dev_tenant *t;

	if (c == NULL || d->node == 0)
		return -ESTALE; /* S1: only a tenant this node claimed */
	if (d->next_tenant >= (1u << 26))
		return -ENOSPC;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return -ENOMEM;
	snprintf(t->name, sizeof(t->name), "%s", name);
	/* ids unique over the nodes: the low 6 bits are the node's */
	t->id = (d->next_tenant++ << 6) | (d->node - 1);
	t->owner = d->node;
	t->epoch = c->epoch;
	t->aux = NONE;
	atomic_init(&t->owned, true);
	drop_others(d, name, NULL);
	if (dev_tenant_add(d, t) != 0) {
		free(t);
		return -ENOMEM;
	}
	claim_forget(d, name);
	d->changes++;
	*ret = t;
	return 0;
}

/* Moves peer p's entry t into d as this node's at epoch (S2). [d->mu] */
static int take_over(struct dev_storage *d, struct dev_storage *p, struct dev_tenant *t,
                     uint64_t epoch)
{
	size_t j;

	for (j = 0; j < p->ntenants; j++)
		if (p->tenants[j] == t)
			p->tenants[j] = p->tenants[--p->ntenants];
	if (dev_tenant_add(d, t) != 0) {
		dev_tenant_free(t);
		return -ENOMEM;
	}
	t->owner = d->node;
	t->epoch = epoch;
	t->aux = NONE; /* S2: blobs from now on go to an extent of this node */
	t->aux_off = 0;
	t->handles = 0;
	t->lock = 0;
	t->lost = false;
	atomic_store(&t->owned, true);
	for (j = 0; j < t->nsegs; j++) {
		struct dev_segment *s = t->segs[j];
		s->len_known = s->sealed; /* S2: an open one's end is found by recovery */
		s->seed = 0;
		d->ext[s->extent] = p->ext[s->extent];
		d->ext[s->extent].tenant = t->id;
		d->ext[s->extent].readers = 0;
	}
	for (j = 0; j < t->nblobs; j++)
		for (uint32_t e = 0; e < t->blobs[j].nexts; e++) {
			uint32_t i = t->blobs[j].exts[e];
			d->ext[i] = p->ext[i];
			d->ext[i].tenant = t->id;
			d->ext[i].readers = 0;
			d->ext[i].users = 0;
		}
	for (j = 0; j < t->nblobs; j++)
		for (uint32_t e = 0; e < t->blobs[j].nexts; e++)
			d->ext[t->blobs[j].exts[e]].users++;
	/* the old packing extent, if it holds none of its blobs, is named by
	 * nothing now: its node frees it after the grace period */
	d->changes++;
	return 0;
}

/* The extents t names, in memory the caller frees (NULL: none, or no memory). */
static uint32_t *extents_of(const struct dev_tenant *t, size_t *ret_n)
{
	size_t n = t->nsegs + (t->aux != NONE), k = 0;
	uint32_t *v;

	for (size_t j = 0; j < t->nblobs; j++)
		n += t->blobs[j].nexts;
	*ret_n = 0;
	if (n == 0 || (v = calloc(n, sizeof(*v))) == NULL)
		return NULL;
	for (size_t j = 0; j < t->nsegs; j++)
		v[k++] = t->segs[j]->extent;
	for (size_t j = 0; j < t->nblobs; j++)
		for (uint32_t e = 0; e < t->blobs[j].nexts; e++)
			v[k++] = t->blobs[j].exts[e];
	if (t->aux != NONE)
		v[k++] = t->aux;
	*ret_n = k;
	return v;
}

int dev_shared_claim(struct kv_storage *st, const char *tenant, uint64_t epoch)
{
	struct dev_storage *d = dev_of(st);
	struct peers ps = {0};
	struct entry *v = NULL, *w = NULL;
	struct dev_tenant *fresh;
	struct dev_claim *c;
	uint32_t *stale = NULL;
	size_t n, i, nstale = 0;
	bool took_over = false;
	int rv;

	if (d->node == 0)
		return -EROFS;
	if ((rv = peers_load(d, &ps)) != 0)
		return rv;
	pthread_mutex_lock(&d->mu);
	if ((rv = entries(d, &ps, &v, &n)) != 0)
		goto out;
	for (i = 0; i < n && w == NULL; i++)
		if (strcmp(v[i].t->name, tenant) == 0)
			w = &v[i]; /* the newest */
	if (w != NULL && (w->t->epoch > epoch || (w->t->epoch == epoch && w->p != NULL))) {
		rv = -ESTALE;
		goto out;
	}
	for (i = 0; i < d->ntenants; i++)
		if (strcmp(d->tenants[i]->name, tenant) == 0 && d->tenants[i]->handles > 0 &&
		    (w == NULL || d->tenants[i] != w->t)) {
			rv = -EBUSY; /* an older entry of it is still open here */
			goto out;
		}
	if (w == NULL || w->t->tomb) {
		/* no node has it: made under this epoch if it is created */
		if ((c = claim_find(d, tenant)) == NULL) {
			if ((rv = dev_push((void **)&d->claims, &d->nclaims, &d->capclaims,
			                   sizeof(*d->claims))) != 0)
				goto out;
			c = &d->claims[d->nclaims - 1];
			snprintf(c->name, sizeof(c->name), "%s", tenant);
		}
		c->epoch = epoch;
		rv = -ENOENT;
		goto out;
	}
	fresh = w->t;
	if (w->p == NULL) {
		/* still this node's newest entry: a new epoch for it */
		if (w->t->handles > 0) {
			rv = -EBUSY;
			goto out;
		}
		w->t->epoch = epoch;
		w->t->owner = d->node;
		atomic_store(&w->t->owned, true);
		d->changes++;
	} else {
		drop_others(d, tenant, NULL);
		if ((rv = take_over(d, w->p, w->t, epoch)) == 0) {
			stale = extents_of(w->t, &nstale);
			took_over = true;
		}
	}
	/* what the other entries named changes hands */
	if (rv == 0) {
		uint8_t *named = calloc(d->sb.extent_count, 1);
		if (named == NULL)
			rv = -ENOMEM;
		else if ((rv = judge(d, &ps, named)) == 0)
			mark(d, named, false, fresh);
		free(named);
	}
out:
	pthread_mutex_unlock(&d->mu);
	free(v);
	peers_free(&ps);
	/* S6: what this node's cache holds of the extents it took over may be
	 * of an earlier use (another node freed and reused them meanwhile) */
	for (i = 0; i < nstale; i++)
		dev_cache_drop_range(d->cache, dev_extent_off(&d->sb, stale[i]), d->sb.extent_size);
	if (took_over && stale == NULL) /* no memory for the list: all of it */
		dev_cache_drop_range(d->cache, d->sb.data_off,
		                     (uint64_t)d->sb.extent_count * d->sb.extent_size);
	free(stale);
	if (rv == 0)
		rv = dev_cat_write(d); /* durable before it is served */
	return rv;
}

int dev_shared_disown(struct kv_storage *st, const char *tenant)
{
	struct dev_storage *d = dev_of(st);

	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < d->ntenants; i++)
		if (tenant == NULL || strcmp(d->tenants[i]->name, tenant) == 0)
			atomic_store(&d->tenants[i]->owned, false);
	if (tenant == NULL)
		d->nclaims = 0;
	else
		claim_forget(d, tenant);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

int dev_shared_directory(struct kv_storage *st, struct kv_dev_tenant **ret, size_t *ret_n)
{
	struct dev_storage *d = dev_of(st);
	struct peers ps = {0};
	struct kv_dev_tenant *out = NULL;
	struct entry *v = NULL;
	size_t n, i, k = 0;
	int rv;

	if ((rv = peers_load(d, &ps)) != 0)
		return rv;
	pthread_mutex_lock(&d->mu);
	if ((rv = entries(d, &ps, &v, &n)) == 0 &&
	    (out = calloc(n ? n : 1, sizeof(*out))) == NULL)
		rv = -ENOMEM;
	for (i = 0; rv == 0 && i < n; i++) {
		if ((i > 0 && strcmp(v[i - 1].t->name, v[i].t->name) == 0) || v[i].t->tomb)
			continue;
		snprintf(out[k].name, sizeof(out[k].name), "%s", v[i].t->name);
		out[k].node = v[i].node;
		out[k].epoch = v[i].t->epoch;
		k++;
	}
	pthread_mutex_unlock(&d->mu);
	free(v);
	peers_free(&ps);
	if (rv != 0) {
		free(out);
		return rv;
	}
	*ret = out;
	*ret_n = k;
	return 0;
}
