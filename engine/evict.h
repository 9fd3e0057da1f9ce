/*
 * evict.h — the write order of an evict=oldest database: its live keys by
 * the version of their newest record, oldest first, so the write path can
 * evict the least recently written ones (kv_options.evict).
 *
 * An entry is (version, location of that record): 16 bytes per live key.
 * The key itself is not kept: the record at the location holds it, and the
 * write path reads it from there when it evicts (read_key_at). Entries are
 * appended in version order as batches are applied, so the array stays
 * sorted by version; an entry whose key was overwritten, deleted or
 * evicted is found by binary search and marked gone (location 0), gone
 * entries at the front are dropped, and the array is compacted once gone
 * entries outnumber live ones. A merge that moves a head record moves its
 * entry's location the same way.
 *
 * Invariants:
 *   1. e[head..n) is sorted by version, strictly ascending.
 *   2. Every live (non-tombstone) key of the key directory has exactly one
 *      entry with its head's version and location, unless `stale` is set
 *      (an append failed for lack of memory): then the order is rebuilt
 *      from the key directory before it is used.
 *   3. gone counts the entries of e[head..n) with location 0.
 *
 * Threads: owned by the write-path driver (db.h); built at open before the
 * driver exists. Never read by anyone else (kv_stats reads the atomic
 * db->evict_bytes the driver keeps).
 */
#ifndef KV_EVICT_H
#define KV_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct keydir;

struct evict_ent {
	uint64_t version;
	uint64_t loc; /* loc_make(seg, off) of the head record; 0: gone */
};

struct evict_order {
	struct evict_ent *e;
	size_t head, n, cap; /* entries e[head..n) */
	size_t gone;         /* of them, marked gone */
	bool stale;          /* rebuild before use (invariant 2) */
};

void evict_order_init(struct evict_order *o);
void evict_order_release(struct evict_order *o);

/* Replaces the order with the live keys of kd, by version. 0 or -ENOMEM
 * (the order is then empty and stale). */
int evict_order_build(struct evict_order *o, const struct keydir *kd);

/* Appends a record newer than every entry. On -ENOMEM the order is marked
 * stale (rebuilt at its next use). */
void evict_order_append(struct evict_order *o, uint64_t version, uint64_t loc);

/* The key whose head had version no longer has it (overwritten, deleted,
 * evicted, dropped by merge): its entry goes. */
void evict_order_forget(struct evict_order *o, uint64_t version);

/* The head record of version moved to loc (merge). */
void evict_order_move(struct evict_order *o, uint64_t version, uint64_t loc);

/* Entries still live. */
static inline size_t evict_order_live(const struct evict_order *o)
{
	return o->n - o->head - o->gone;
}

/* Bytes of memory the order holds. */
size_t evict_order_memory(const struct evict_order *o);

#endif
