/*
 * kdimage.h — the key-directory image written at a clean close and loaded,
 * instead of the hint files, by the next open when nothing changed in
 * between (kdimage.c has the layout and the rules).
 */
#ifndef KV_KDIMAGE_H
#define KV_KDIMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "kvengine.h"

#define KDIMAGE_NAME     "KEYDIR"    /* the tenant's metadata blob that holds it */
#define KDIMAGE_SEG_HINT 0x80000000u /* kdimage_seg's flags: the segment has a hint file */

struct keydir;

struct kdimage {
	uint8_t *buf;
	size_t len;
	uint32_t nsegs; /* the segments it was written for: kdimage_seg */
	uint64_t live_keys, tombstones, live_bytes, tomb_bytes;
	uint64_t max_version; /* the highest version given out before the close */
	uint64_t records;     /* keys in the directory */
};

/* kv_close, after the hints: writes the image of db's key directory (or
 * nothing, when kdimage.c invariant 3 rules it out). 0 or the storage's
 * error; the image is only a cache, so the caller need not fail. */
int kdimage_save(kv_db *db);

/* Reads the image, removes it (kdimage.c invariant 2) and checks its
 * header, checksum and META: 0 and *im filled; -ENOENT (none); KV_ECORRUPT
 * (unusable: damaged, of another host or version, META changed);
 * another -errno of the storage. The caller checks the segments against
 * kdimage_seg. */
int kdimage_take(kv_db *db, struct kdimage *im);
void kdimage_seg(const struct kdimage *im, uint32_t i, uint32_t *ret_id, uint32_t *ret_flags,
                 uint64_t *ret_size);
/* The key directory it holds: 0, KV_ECORRUPT, -ENOMEM. */
int kdimage_keydir(const struct kdimage *im, struct keydir **ret);
void kdimage_release(struct kdimage *im);

#endif
