/*
 * evict.c — the write order of an evict=oldest database (evict.h says what
 * it holds, its invariants and who may call it).
 */
#include "evict.h"

#include "keydir.h"
#include "kvengine.h"
#include "reloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int kv_evict_parse(const char *s, size_t n, enum kv_evict *ret)
{
	if (n == 6 && memcmp(s, "refuse", 6) == 0)
		*ret = KV_EVICT_REFUSE;
	else if (n == 6 && memcmp(s, "oldest", 6) == 0)
		*ret = KV_EVICT_OLDEST;
	else
		return -EINVAL;
	return 0;
}

const char *kv_evict_name(enum kv_evict e)
{
	return e == KV_EVICT_REFUSE ? "refuse" : e == KV_EVICT_OLDEST ? "oldest" : NULL;
}

void evict_order_init(struct evict_order *o)
{
	memset(o, 0, sizeof(*o));
}

void evict_order_release(struct evict_order *o)
{
	if (o == NULL)
		return;
	free(o->e);
	evict_order_init(o);
}

size_t evict_order_memory(const struct evict_order *o)
{
	return o->cap * sizeof(*o->e);
}

struct build {
	struct evict_ent *e;
	size_t n, cap;
};

static int build_visit(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct build *b = arg;

	(void)key;
	(void)len;
	if (e->flags & KD_F_TOMBSTONE)
		return 0;
	if (b->n == b->cap)
		return 1; /* (sized from the count: cannot happen) */
	b->e[b->n].version = e->version;
	b->e[b->n].loc = loc_make(e->seg, e->off);
	b->n++;
	return 0;
}

static int by_version(const void *a, const void *b)
{
	uint64_t x = ((const struct evict_ent *)a)->version;
	uint64_t y = ((const struct evict_ent *)b)->version;

	return x < y ? -1 : x > y;
}

int evict_order_build(struct evict_order *o, const struct keydir *kd)
{
	struct build b = {NULL, 0, keydir_count(kd)};
	int rv;

	evict_order_release(o);
	o->stale = true;
	if (b.cap > 0 && (b.e = malloc(b.cap * sizeof(*b.e))) == NULL)
		return -ENOMEM;
	if ((rv = keydir_walk(kd, NULL, 0, true, false, build_visit, &b)) < 0) {
		free(b.e);
		return rv;
	}
	if (b.n > 1)
		qsort(b.e, b.n, sizeof(*b.e), by_version);
	if (b.n < b.cap) {
		/* sized for every key, tombstones included: keep the live ones' */
		struct evict_ent *ne = b.n > 0 ? realloc(b.e, b.n * sizeof(*ne)) : NULL;
		if (ne != NULL || b.n == 0) {
			if (b.n == 0)
				free(b.e);
			b.e = ne;
			b.cap = b.n;
		}
	}
	o->e = b.e;
	o->n = b.n;
	o->cap = b.cap;
	o->stale = false;
	return 0;
}

/* Drops gone entries at the front; compacts once gone ones outnumber live
 * ones, and gives memory back when the array is mostly empty. */
static void tidy(struct evict_order *o)
{
	size_t w = 0, i;

	while (o->head < o->n && o->e[o->head].loc == 0) {
		o->head++;
		o->gone--;
	}
	if (o->head == o->n) {
		o->head = o->n = o->gone = 0;
	} else if (o->gone > evict_order_live(o) || o->head > o->n / 2) {
		for (i = o->head; i < o->n; i++)
			if (o->e[i].loc != 0)
				o->e[w++] = o->e[i];
		o->head = 0;
		o->n = w;
		o->gone = 0;
	}
	if (o->cap > 1024 && o->n < o->cap / 4) {
		struct evict_ent *ne = realloc(o->e, o->cap / 2 * sizeof(*ne));
		if (ne != NULL) {
			o->e = ne;
			o->cap /= 2;
		}
	}
}

void evict_order_append(struct evict_order *o, uint64_t version, uint64_t loc)
{
	if (o->stale)
		return;
	if (o->n == o->cap) {
		if (o->head > 0) {
			/* room at the front: move down instead of growing */
			memmove(o->e, o->e + o->head, (o->n - o->head) * sizeof(*o->e));
			o->n -= o->head;
			o->head = 0;
		}
		if (o->n == o->cap) {
			size_t cap = o->cap ? o->cap * 2 : 256;
			struct evict_ent *ne = realloc(o->e, cap * sizeof(*ne));
			if (ne == NULL) {
				o->stale = true;
				return;
			}
			o->e = ne;
			o->cap = cap;
		}
	}
	o->e[o->n].version = version;
	o->e[o->n].loc = loc;
	o->n++;
}

/* Index of the entry of version in e[head..n), or SIZE_MAX. */
static size_t find(const struct evict_order *o, uint64_t version)
{
	size_t lo = o->head, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->e[mid].version == version)
			return mid;
		if (o->e[mid].version < version)
			lo = mid + 1;
		else
			hi = mid;
	}
	return SIZE_MAX;
}

void evict_order_forget(struct evict_order *o, uint64_t version)
{
	size_t i;

	if (o->stale || (i = find(o, version)) == SIZE_MAX || o->e[i].loc == 0)
		return;
	o->e[i].loc = 0;
	o->gone++;
	tidy(o);
}

void evict_order_move(struct evict_order *o, uint64_t version, uint64_t loc)
{
	size_t i;

	if (!o->stale && (i = find(o, version)) != SIZE_MAX && o->e[i].loc != 0)
		o->e[i].loc = loc;
}
