/*
 * dedup.h — the table that makes writes carrying a client id idempotent: it
 * remembers each such write of one worker by (client, id), while it is in
 * flight and, once answered, with the bytes of its reply.
 *
 * A write is remembered while it is in flight, and once answered for as
 * long as it is among the last `cap` writes the table was given (DEDUP_CAP
 * in the daemon) and less than `ttl_ms` (DEDUP_TTL_MS) has passed since its
 * reply, whichever ends first. Both bounds are checked on every lookup, so
 * a repeat past either is a new write, whenever memory is reclaimed.
 *
 * Times are the caller's (milliseconds of one monotonic clock); a time
 * earlier than the entry's own (read before it was remembered) counts as no
 * time passed.
 *
 * Threads: a table belongs to one thread (its worker); nothing locks.
 */
#ifndef KVD_DEDUP_H
#define KVD_DEDUP_H

#include <stddef.h>
#include <stdint.h>

#define DEDUP_CAP    65536u         /* answered writes remembered per worker */
#define DEDUP_TTL_MS (120u * 1000u) /* and for at most this long after their reply */

struct job;

struct dedup_ent {
	uint64_t client, id;
	struct job *pending; /* the write in flight, or NULL once answered */
	uint8_t *reply;      /* its reply (NULL when it could not be kept) */
	size_t len;
	uint64_t seq;  /* the table's count of writes when it was remembered */
	uint64_t t_ms; /* when it was answered */
	struct dedup_ent *hnext;
	struct dedup_ent *fprev, *fnext; /* oldest first */
};

struct dedup {
	struct dedup_ent **bucket; /* nbuckets chains */
	uint32_t nbuckets;
	struct dedup_ent *head, *tail;
	uint32_t n;   /* entries held */
	uint32_t cap; /* writes remembered */
	uint64_t ttl_ms;
	uint64_t seq; /* writes remembered so far */
};

/* 0, or -ENOMEM. cap ≥ 1. */
int dedup_init(struct dedup *dd, uint32_t cap, uint64_t ttl_ms);
/* Frees every entry (their pending jobs are the caller's). Accepts a table
 * that dedup_init failed on or never saw (zeroed). */
void dedup_release(struct dedup *dd);
/* The entry of (client, id) when the table still remembers it at now, else
 * NULL (and a forgotten entry is freed). */
struct dedup_ent *dedup_find(struct dedup *dd, uint64_t client, uint64_t id, uint64_t now);
/* Remembers a write going in flight (dedup_find gave NULL for it); frees
 * what is no longer remembered. NULL when out of memory: the write is then
 * not remembered. */
struct dedup_ent *dedup_insert(struct dedup *dd, uint64_t client, uint64_t id, struct job *pending,
                               uint64_t now);
/* The write of e was answered at now with these reply bytes (copied; when
 * the copy fails the write is forgotten). */
void dedup_answered(struct dedup *dd, struct dedup_ent *e, const void *reply, size_t len,
                    uint64_t now);
/* Frees the answered entries no longer remembered at now, oldest first. */
void dedup_expire(struct dedup *dd, uint64_t now);

#endif
