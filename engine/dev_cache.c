/* dev_cache.c — the device backend's read cache (dev_cache.h): an open
 * hash table of chunk offsets over a fixed array of slots, CLOCK eviction. */
#include "dev_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct slot {
	uint64_t key; /* chunk offset; UINT64_MAX: empty */
	uint32_t next; /* hash chain */
	bool ref;
	uint8_t *data;
};

struct dev_cache {
	pthread_mutex_t mu;
	struct slot *slots;
	uint32_t n;
	uint32_t *heads;
	uint32_t nheads; /* a power of two */
	uint32_t hand;
	uint32_t unit;
	uint64_t hits, misses;
};

static uint32_t bucket(const struct dev_cache *c, uint64_t key)
{
	key /= c->unit;
	key *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(key >> 32) & (c->nheads - 1);
}

int dev_cache_new(uint64_t bytes, uint32_t unit, struct dev_cache **ret)
{
	struct dev_cache *c;
	uint32_t i;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&c->mu, NULL);
	c->unit = unit;
	c->n = (uint32_t)(bytes / unit);
	for (c->nheads = 1; c->nheads < c->n * 2u && c->nheads < (1u << 30); c->nheads <<= 1)
		;
	c->slots = calloc(c->n ? c->n : 1, sizeof(*c->slots));
	c->heads = malloc(c->nheads * sizeof(*c->heads));
	if (c->slots == NULL || c->heads == NULL) {
		dev_cache_free(c);
		return -ENOMEM;
	}
	for (i = 0; i < c->nheads; i++)
		c->heads[i] = NIL;
	for (i = 0; i < c->n; i++)
		c->slots[i] = (struct slot){.key = UINT64_MAX, .next = NIL};
	*ret = c;
	return 0;
}

void dev_cache_free(struct dev_cache *c)
{
	uint32_t i;

	if (c == NULL)
		return;
	for (i = 0; c->slots != NULL && i < c->n; i++)
		free(c->slots[i].data);
	free(c->slots);
	free(c->heads);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static uint32_t find(struct dev_cache *c, uint64_t key)
{
	uint32_t i;

	for (i = c->heads[bucket(c, key)]; i != NIL; i = c->slots[i].next)
		if (c->slots[i].key == key)
			return i;
	return NIL;
}

static void unchain(struct dev_cache *c, uint32_t s)
{
	uint32_t *p = &c->heads[bucket(c, c->slots[s].key)];

	while (*p != s)
		p = &c->slots[*p].next;
	*p = c->slots[s].next;
	c->slots[s].key = UINT64_MAX;
	c->slots[s].next = NIL;
}

bool dev_cache_get(struct dev_cache *c, uint64_t chunk_off, size_t off, void *dst, size_t len)
{
	uint32_t s;
	bool hit = false;

	if (c == NULL)
		return false;
	pthread_mutex_lock(&c->mu);
	if (c->n > 0 && (s = find(c, chunk_off)) != NIL) {
		memcpy(dst, c->slots[s].data + off, len);
		c->slots[s].ref = true;
		hit = true;
		c->hits++;
	} else {
		c->misses++;
	}
	pthread_mutex_unlock(&c->mu);
	return hit;
}

void dev_cache_put(struct dev_cache *c, uint64_t chunk_off, const void *data)
{
	uint32_t s, h;

	if (c == NULL || c->n == 0)
		return;
	pthread_mutex_lock(&c->mu);
	if (find(c, chunk_off) != NIL)
		goto out;
	for (;;) { /* CLOCK: the first slot not referenced since the hand passed */
		s = c->hand;
		c->hand = (c->hand + 1) % c->n;
		if (!c->slots[s].ref)
			break;
		c->slots[s].ref = false;
	}
	if (c->slots[s].key != UINT64_MAX)
		unchain(c, s);
	if (c->slots[s].data == NULL && (c->slots[s].data = malloc(c->unit)) == NULL)
		goto out;
	memcpy(c->slots[s].data, data, c->unit);
	c->slots[s].key = chunk_off;
	c->slots[s].ref = false;
	h = bucket(c, chunk_off);
	c->slots[s].next = c->heads[h];
	c->heads[h] = s;
out:
	pthread_mutex_unlock(&c->mu);
}

void dev_cache_drop_range(struct dev_cache *c, uint64_t off, uint64_t len)
{
	uint64_t k;
	uint32_t s;

	if (c == NULL || c->n == 0)
		return;
	pthread_mutex_lock(&c->mu);
	if (len / c->unit > c->n) {
		/* a range larger than the cache: look at every slot instead */
		for (s = 0; s < c->n; s++)
			if (c->slots[s].key != UINT64_MAX && c->slots[s].key >= off &&
			    c->slots[s].key < off + len)
				unchain(c, s);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	for (k = off - off % c->unit; k < off + len; k += c->unit)
		if ((s = find(c, k)) != NIL)
			unchain(c, s);
	pthread_mutex_unlock(&c->mu);
}

void dev_cache_counts(struct dev_cache *c, uint64_t *ret_hits, uint64_t *ret_misses)
{
	if (c == NULL) {
		*ret_hits = *ret_misses = 0;
		return;
	}
	pthread_mutex_lock(&c->mu);
	*ret_hits = c->hits;
	*ret_misses = c->misses;
	pthread_mutex_unlock(&c->mu);
}
