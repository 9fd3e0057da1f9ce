/*
 * dedup.c — the de-duplication table of one worker's writes (dedup.h).
 *
 * Invariants:
 *   1. Every entry is in its hash chain and in the list, which is in the
 *      order the writes were remembered (seq ascending).
 *   2. An entry whose write is in flight (pending) is never freed: a repeat
 *      waits for that write's reply instead of being applied again.
 *   3. An answered entry holds its reply; dedup_find returns it only while
 *      it is among the last cap writes and younger than ttl_ms, so what a
 *      repeat gets does not depend on when memory was last reclaimed.
 *   4. Entries beyond those bounds are freed oldest first by dedup_expire,
 *      skipping the ones in flight; an insert that takes the table past cap
 *      entries runs it, so the table holds at most cap answered entries
 *      plus the writes in flight.
 */
#include "dedup.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static struct dedup_ent **slot_of(struct dedup *dd, uint64_t client, uint64_t id)
{
	uint64_t key[2] = {client, id};
	return &dd->bucket[XXH3_64bits(key, sizeof(key)) % dd->nbuckets];
}

/* Whether an answered entry is still remembered at now (invariant 3). */
static bool remembered(const struct dedup *dd, const struct dedup_ent *e, uint64_t now)
{
	uint64_t age = now > e->t_ms ? now - e->t_ms : 0;

	return e->pending != NULL || (dd->seq - e->seq < dd->cap && age < dd->ttl_ms);
}

static void unlink_free(struct dedup *dd, struct dedup_ent *e)
{
	struct dedup_ent **pp;

	for (pp = slot_of(dd, e->client, e->id); *pp != e; pp = &(*pp)->hnext)
		;
	*pp = e->hnext;
	if (e->fprev != NULL)
		e->fprev->fnext = e->fnext;
	else
		dd->head = e->fnext;
	if (e->fnext != NULL)
		e->fnext->fprev = e->fprev;
	else
		dd->tail = e->fprev;
	free(e->reply);
	free(e);
	dd->n--;
}

int dedup_init(struct dedup *dd, uint32_t cap, uint64_t ttl_ms)
{
	memset(dd, 0, sizeof(*dd));
	dd->nbuckets = cap > 0 ? cap : 1; /* as many as entries: chains of about one */
	if ((dd->bucket = calloc(dd->nbuckets, sizeof(*dd->bucket))) == NULL)
		return -ENOMEM;
	dd->cap = cap > 0 ? cap : 1;
	dd->ttl_ms = ttl_ms;
	return 0;
}

void dedup_release(struct dedup *dd)
{
	while (dd->head != NULL) {
		struct dedup_ent *e = dd->head;
		dd->head = e->fnext;
		free(e->reply);
		free(e);
	}
	free(dd->bucket);
	memset(dd, 0, sizeof(*dd));
}

struct dedup_ent *dedup_find(struct dedup *dd, uint64_t client, uint64_t id, uint64_t now)
{
	struct dedup_ent *e;

	for (e = *slot_of(dd, client, id); e != NULL; e = e->hnext)
		if (e->client == client && e->id == id)
			break;
	if (e != NULL && !remembered(dd, e, now)) {
		unlink_free(dd, e);
		e = NULL;
	}
	return e;
}

void dedup_expire(struct dedup *dd, uint64_t now)
{
	struct dedup_ent *e = dd->head, *next;

	while (e != NULL) {
		next = e->fnext;
		if (e->pending == NULL) {
			if (remembered(dd, e, now))
				break;
			unlink_free(dd, e);
		}
		e = next;
	}
}

struct dedup_ent *dedup_insert(struct dedup *dd, uint64_t client, uint64_t id, struct job *pending,
                               uint64_t now)
{
	struct dedup_ent *e = calloc(1, sizeof(*e)), **slot;

	if (e == NULL)
		return NULL;
	e->client = client;
	e->id = id;
	e->pending = pending;
	e->seq = ++dd->seq;
	e->t_ms = now;
	slot = slot_of(dd, client, id);
	e->hnext = *slot;
	*slot = e;
	e->fprev = dd->tail;
	if (dd->tail != NULL)
		dd->tail->fnext = e;
	else
		dd->head = e;
	dd->tail = e;
	if (++dd->n > dd->cap)
		dedup_expire(dd, now);
	return e;
}

void dedup_answered(struct dedup *dd, struct dedup_ent *e, const void *reply, size_t len,
                    uint64_t now)
{
	e->pending = NULL;
	e->t_ms = now;
	if ((e->reply = malloc(len > 0 ? len : 1)) == NULL) {
		unlink_free(dd, e);
		return;
	}
	memcpy(e->reply, reply, len);
	e->len = len;
}
