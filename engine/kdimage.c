/*
 * kdimage.c — the key-directory image: at a clean close the key directory is
 * written whole, as the memory it is (keydir_image_write), beside the log;
 * the next open loads it instead of reading the hint files, when nothing
 * changed in between. The image is a cache, like the hints: without it, or
 * when it does not match, recovery reads the hints (recovery.c, step 4).
 *
 * Layout (KEYDIR, a metadata blob of the tenant; host byte order: it is read
 * only by the host that wrote it, which the byte-order mark checks):
 *
 *   0   "KVKDIMG1"
 *   8   u32 version (2: leaves with 32-bit versions), u32 byte-order mark 0x01020304
 *   16  u64 XXH3-64 of every byte from offset 24 to the end
 *   24  u64 XXH3-64 of META's bytes at the close (0 with no META)
 *   32  u32 segments, u32 META present
 *   40  u64 live keys, tombstones, live bytes, tombstone bytes, the highest
 *       version given out, records
 *   88  per segment: u32 id, u32 flags (SEG_F_*, and bit 31 when it has a
 *       hint file), u64 size
 *   ..  the key directory's image (keydir.h)
 *
 * Invariants:
 *   1. An image is used only when every segment there is a trace of is the
 *      one it lists, with the same size, flags and hint file (or none), and
 *      META is byte for byte the same: a write, a merge, a seal or a drop since the close
 *      changes one of them (writes only append; segment ids are never used
 *      twice; every change of the set rewrites META or adds a segment).
 *   2. It is removed when it is read (before the first write), so an image
 *      never outlives the open it was written for; if the removal does not
 *      reach the disk before a crash, invariant 1 still rejects it after
 *      any change.
 *   3. It is written only when the directory holds nothing recovery adds
 *      outside the key directory and the counts above: no blob heads, no
 *      lost segment.
 *   4. Only on the files backend. On a device an image of up to 1 GiB
 *      would be written and removed through the catalog at every
 *      passivation, which no crash test covers yet; a device's tenants
 *      activate from their hints.
 */
#include "db.h"

#include "kdimage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define IMG_MAGIC   "KVKDIMG1"
#define IMG_VERSION 2u
#define IMG_BOM     0x01020304u
#define IMG_HEAD    88u
#define IMG_SEG     16u

/* META's bytes as they are on disk: the copy db keeps of what it last read
 * (recovery step 3) or wrote (manifest_write); none for a META older than
 * format 2, which nothing rewrites without setting the copy. */
static uint64_t meta_hash(kv_db *db, bool *ret_present)
{
	*ret_present = db->meta != NULL;
	return db->meta != NULL ? XXH3_64bits(db->meta, db->meta_len) : 0;
}

int kdimage_save(kv_db *db)
{
	uint32_t head[4] = {0, IMG_VERSION, IMG_BOM, 0};
	uint64_t counts[6];
	uint8_t *buf, *p;
	size_t len, i;
	bool present;
	uint64_t h;
	int rv;

	if (db->has_lost || db->blob_heads.n > 0 || keydir_count(db->kd) == 0)
		return 0; /* invariant 3; an empty directory loads as fast from hints */
	/* the files backend alone (invariant 4) */
	if (strcmp(db->stor->ops->name, "files") != 0)
		return 0;
	for (i = 0; i < db->nsegs; i++)
		if (db->segs[i]->retired || db->segs[i]->lost || !db->segs[i]->sealed ||
		    (db->segs[i]->flags & KDIMAGE_SEG_HINT))
			return 0;
	len = IMG_HEAD + db->nsegs * IMG_SEG + keydir_image_size(db->kd);
	if (len > KV_STOR_META_MAX)
		return 0;
	if ((buf = malloc(len)) == NULL)
		return -ENOMEM;
	memcpy(buf, IMG_MAGIC, 8);
	memcpy(buf + 8, &head[1], 8);
	h = meta_hash(db, &present);
	memcpy(buf + 24, &h, 8);
	head[0] = (uint32_t)db->nsegs;
	head[1] = present;
	memcpy(buf + 32, head, 8);
	counts[0] = db->live_keys;
	counts[1] = db->tombstones;
	counts[2] = db->live_bytes;
	counts[3] = db->tomb_bytes;
	counts[4] = db->next_version - 1;
	counts[5] = keydir_count(db->kd);
	memcpy(buf + 40, counts, sizeof(counts));
	p = buf + IMG_HEAD;
	for (i = 0; i < db->nsegs; i++, p += IMG_SEG) {
		const struct seg *s = db->segs[i];
		uint32_t idf[2] = {s->id, s->flags | (s->has_hint ? KDIMAGE_SEG_HINT : 0)};
		memcpy(p, idf, 8);
		memcpy(p + 8, &s->size, 8);
	}
	keydir_image_write(db->kd, p);
	h = XXH3_64bits(buf + 24, len - 24);
	memcpy(buf + 16, &h, 8);
	rv = stor_meta_put(db->tn, KDIMAGE_NAME, buf, len, 0);
	free(buf);
	return rv;
}

void kdimage_release(struct kdimage *im)
{
	free(im->buf);
	memset(im, 0, sizeof(*im));
}

int kdimage_take(kv_db *db, struct kdimage *im)
{
	uint32_t head[4];
	uint64_t h, counts[6];
	bool present;
	int rv;

	memset(im, 0, sizeof(*im));
	rv = stor_meta_get(db->tn, KDIMAGE_NAME, KV_STOR_META_MAX, &im->buf, &im->len);
	if (rv != 0)
		return rv == -ENOENT ? rv : KV_ECORRUPT;
	/* invariant 2 */
	if ((rv = stor_meta_remove(db->tn, KDIMAGE_NAME)) != 0)
		goto bad;
	rv = KV_ECORRUPT;
	if (im->len < IMG_HEAD || memcmp(im->buf, IMG_MAGIC, 8) != 0)
		goto bad;
	memcpy(head, im->buf + 8, 8);
	if (head[0] != IMG_VERSION || head[1] != IMG_BOM)
		goto bad;
	memcpy(&h, im->buf + 16, 8);
	if (h != XXH3_64bits(im->buf + 24, im->len - 24))
		goto bad;
	memcpy(head, im->buf + 32, 8);
	memcpy(&h, im->buf + 24, 8);
	if (h != meta_hash(db, &present) || present != (head[1] != 0))
		goto bad; /* not an error: META changed since (invariant 1) */
	if ((im->len - IMG_HEAD) / IMG_SEG < head[0])
		goto bad;
	im->nsegs = head[0];
	memcpy(counts, im->buf + 40, sizeof(counts));
	im->live_keys = counts[0];
	im->tombstones = counts[1];
	im->live_bytes = counts[2];
	im->tomb_bytes = counts[3];
	im->max_version = counts[4];
	im->records = counts[5];
	return 0;
bad:
	kdimage_release(im);
	return rv;
}

void kdimage_seg(const struct kdimage *im, uint32_t i, uint32_t *ret_id, uint32_t *ret_flags,
                 uint64_t *ret_size)
{
	const uint8_t *p = im->buf + IMG_HEAD + (size_t)i * IMG_SEG;
	uint32_t idf[2];

	memcpy(idf, p, 8);
	memcpy(ret_size, p + 8, 8);
	*ret_id = idf[0];
	*ret_flags = idf[1];
}

int kdimage_keydir(const struct kdimage *im, struct keydir **ret)
{
	size_t off = IMG_HEAD + (size_t)im->nsegs * IMG_SEG;
	struct keydir *kd;
	int rv;

	if ((rv = keydir_image_read(im->buf + off, im->len - off, &kd)) != 0)
		return rv == -ENOMEM ? rv : KV_ECORRUPT;
	if (keydir_count(kd) != im->records) {
		keydir_free(kd);
		return KV_ECORRUPT;
	}
	*ret = kd;
	return 0;
}
