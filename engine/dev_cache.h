/*
 * dev_cache.h — the device backend's read cache. A device read with O_DIRECT
 * bypasses the page cache the files backend gets for free, so the backend
 * keeps recently read chunks (one device block each, aligned on the device)
 * of immutable data — sealed segments, the whole blocks of a segment being
 * written below the block its end is in, and hint and metadata blobs — in
 * memory, evicted by CLOCK. Chunks are named by their device offset; a chunk
 * is dropped when its extent is given to a new use or its bytes are
 * rewritten by a truncation (dev_cache_drop_range), so the cache never
 * serves bytes that are no longer there.
 *
 * Threads: every call may come from any thread (one mutex).
 */
#ifndef KV_DEV_CACHE_H
#define KV_DEV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dev_cache;

/* A cache of about bytes in chunks of unit bytes (bytes below one unit:
 * none: every lookup misses, inserts do nothing). */
int dev_cache_new(uint64_t bytes, uint32_t unit, struct dev_cache **ret);
void dev_cache_free(struct dev_cache *c);
/* Copies len bytes at off into the chunk at chunk_off to dst: true on a hit. */
bool dev_cache_get(struct dev_cache *c, uint64_t chunk_off, size_t off, void *dst, size_t len);
/* Keeps a copy of the chunk at chunk_off (unit bytes of data). */
void dev_cache_put(struct dev_cache *c, uint64_t chunk_off, const void *data);
/* Drops every chunk in [off, off+len). */
void dev_cache_drop_range(struct dev_cache *c, uint64_t off, uint64_t len);
void dev_cache_counts(struct dev_cache *c, uint64_t *ret_hits, uint64_t *ret_misses);

#endif
