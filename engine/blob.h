/*
 * blob.h — blobs: the descriptor a committed upload writes, the open
 * uploads merge must keep, and the chunk bytes counted live.
 *
 * A blob is a descriptor record (REC_BLOB, indexed like a put) whose value
 * is (little-endian; docs/FORMAT.md "Blobs"):
 *
 *   0   8  size in bytes
 *   8   4  chunk size
 *   12  4  n: chunks, ceil(size / chunk size)
 *   16  8  XXH64 (seed 0) of the whole blob
 *   24  8  bytes of the n chunk records as stored
 *   32  8n the chunks' locations, in order (segment id << 32 | offset)
 *
 * and chunk records (REC_CHUNK) holding the bytes, written before it.
 *
 * Invariants:
 *   1. A descriptor names only chunks written before it, so a descriptor
 *      in a merge's set names chunks in the set (or already moved: a
 *      location is followed through the relocation map like any other).
 *   2. Merge copies the chunks of every descriptor it keeps and writes the
 *      copy with their new locations; the chunks of uploads open when it
 *      starts it copies too, recording old → new in its relocations, so a
 *      descriptor committed later finds them.
 *   3. live_bytes counts the chunk records of every blob that is a key's
 *      head (db->blob_heads: head location → bytes); upload_bytes those of
 *      open uploads. Neither is reclaimable.
 */
#ifndef KV_BLOB_H
#define KV_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct blob_desc {
	uint64_t size;
	uint32_t chunk_size;
	uint32_t nchunks;
	uint64_t xxh64;
	uint64_t stored;
	const uint8_t *locs; /* nchunks locations, 8 bytes each */
};

/* 0 when v (a descriptor record's value) is a consistent descriptor;
 * KV_ECORRUPT otherwise. */
int blob_desc_parse(const uint8_t *v, size_t len, struct blob_desc *ret);
uint64_t blob_desc_loc(const struct blob_desc *d, uint32_t i);
/* The blob's size from a descriptor value (blob_desc_parse's errors). */
int blob_desc_size(const uint8_t *v, size_t len, uint64_t *ret);
void blob_desc_set_loc(uint8_t *v, uint32_t i, uint64_t loc);
/* The stored-bytes field of a descriptor value. */
void blob_desc_set_stored(uint8_t *v, uint64_t stored);
uint64_t blob_desc_stored(const void *v);

/* A map of locations to byte counts (the blob heads). */
struct blobmap {
	struct blobmap_ent {
		uint64_t loc; /* 0: empty */
		uint64_t bytes;
	} *slots;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};
void blobmap_release(struct blobmap *m);
int blobmap_put(struct blobmap *m, uint64_t loc, uint64_t bytes);
/* The bytes of loc; 0 when it is not there. */
uint64_t blobmap_get(const struct blobmap *m, uint64_t loc);
/* The bytes of loc, removed from the map; 0 when it is not there. */
uint64_t blobmap_take(struct blobmap *m, uint64_t loc);

struct kv_db;

/* Open uploads (for merge): each one's key and the locations of its
 * written chunks, as recorded. Takes db->upload_mu. */
struct blob_open {
	uint8_t *key;
	size_t key_len;
	uint64_t *locs;
	uint32_t n;
};
int blob_open_snapshot(struct kv_db *db, struct blob_open **ret, size_t *ret_n);
void blob_open_release(struct blob_open *v, size_t n);
/* Closes every upload of db still open (kv_close of a careless caller). */
void blob_uploads_orphan(struct kv_db *db);

/* The driver, for each chunk op of a batch that landed: its location and
 * record bytes join its upload's. */
struct kv_op;
void blob_chunk_landed(struct kv_op *op, uint64_t rec_bytes);
/* The driver, encoding a commit (a descriptor op after the upload's last
 * chunk, encoded at chunk_rec): the descriptor names that chunk and counts
 * its bytes. */
void blob_complete(struct kv_op *put, const struct kv_op *chunk, const uint8_t *chunk_rec);
/* Called by the driver as a batch lands, for each key-directory change
 * (rec: its record): a descriptor's chunk bytes move from upload_bytes to
 * live_bytes and its location joins blob_heads; a head replaced takes its
 * chunk bytes off live_bytes. Under kd_lock exclusive. */
void blob_account_apply(struct kv_db *db, const uint8_t *rec, uint64_t loc);
void blob_account_replaced(struct kv_db *db, uint64_t old_loc);
/* Merge moved a head from old_loc to new_loc. */
void blob_account_moved(struct kv_db *db, uint64_t old_loc, uint64_t new_loc);

#endif
