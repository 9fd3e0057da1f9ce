/*
 * manifest.c — reading and writing META (see manifest.h for what it
 * promises, docs/FORMAT.md for its bytes).
 */
#include "manifest.h"

#include "crc.h"
#include "db.h"
#include "endian_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define META_MAGIC    "KVDMETA\1"
#define META_V1_SIZE  28u
#define META_V2_HEAD  48u
#define META_V2_ENTRY 16u
/* a listing longer than segment ids can be is damage, not a file to read */
#define META_MAX_SEGS (1u << 24)

int manifest_parse(const uint8_t *buf, size_t len, struct manifest *ret)
{
	struct manifest m = {0};
	size_t i;
	uint32_t n;

	if (len < META_V1_SIZE || len > META_V2_HEAD + (size_t)META_MAX_SEGS * META_V2_ENTRY + 4 ||
	    memcmp(buf, META_MAGIC, 8) != 0 || crc32c(buf, len - 4) != get_le32(buf + len - 4))
		return KV_ECORRUPT;
	m.format = get_le32(buf + 8);
	if (m.format == 1) {
		if (len != META_V1_SIZE)
			return KV_ECORRUPT;
		m.floor = get_le64(buf + 16);
	} else if (m.format >= 2 && m.format <= 4) {
		n = get_le32(buf + 12);
		if (len < META_V2_HEAD + 4 || (len - META_V2_HEAD - 4) / META_V2_ENTRY != n ||
		    (len - META_V2_HEAD - 4) % META_V2_ENTRY != 0)
			return KV_ECORRUPT;
		m.floor = get_le64(buf + 16);
		m.version_mark = get_le64(buf + 24);
		m.active = get_le32(buf + 32);
		m.merge_from = get_le32(buf + 36);
		m.merge_seq = get_le64(buf + 40);
		if (n > 0 && (m.segs = calloc(n, sizeof(*m.segs))) == NULL)
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			const uint8_t *p = buf + META_V2_HEAD + i * META_V2_ENTRY;
			m.segs[i].id = get_le32(p);
			m.segs[i].size = get_le64(p + 8);
			if (m.segs[i].id == 0 || (i > 0 && m.segs[i].id <= m.segs[i - 1].id)) {
				free(m.segs);
				return KV_ECORRUPT;
			}
		}
		m.nsegs = n;
	} else {
		return KV_EFORMAT;
	}
	*ret = m;
	return 0;
}

int manifest_read(struct kv_stor_tenant *t, struct manifest *ret)
{
	uint8_t *buf = NULL;
	size_t len;
	int rv;

	rv = stor_meta_get(t, "META", META_V2_HEAD + (size_t)META_MAX_SEGS * META_V2_ENTRY + 4,
	                   &buf, &len);
	if (rv != 0)
		return rv == -EIO ? KV_ECORRUPT : rv;
	if (len < META_V1_SIZE) {
		rv = KV_ECORRUPT;
		goto out;
	}
	if ((rv = manifest_parse(buf, len, ret)) != 0)
		goto out;
	ret->raw = buf;
	ret->raw_len = len;
	buf = NULL;
out:
	free(buf);
	return rv;
}

void manifest_release(struct manifest *m)
{
	if (m == NULL)
		return;
	free(m->segs);
	free(m->raw);
	m->segs = NULL;
	m->nsegs = 0;
	m->raw = NULL;
	m->raw_len = 0;
}

const struct manifest_seg *manifest_find(const struct manifest *m, uint32_t id)
{
	size_t lo = 0, hi = m->nsegs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->segs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->nsegs && m->segs[lo].id == id ? &m->segs[lo] : NULL;
}

/* Encodes META for the database as it is now into a new buffer. */
static int manifest_encode(kv_db *db, uint64_t mark, uint8_t **ret, size_t *ret_len)
{
	uint8_t *buf;
	size_t n = 0, i, len;

	pthread_mutex_lock(&db->seg_mu);
	for (i = 0; i < db->nsegs; i++)
		if (db->segs[i]->sealed && !db->segs[i]->retired && db->segs[i] != db->active)
			n++;
	len = META_V2_HEAD + n * META_V2_ENTRY + 4;
	if ((buf = calloc(1, len)) == NULL) {
		pthread_mutex_unlock(&db->seg_mu);
		return -ENOMEM;
	}
	memcpy(buf, META_MAGIC, 8);
	/* 3 once a compressed value was written: a kvd that knows only 2
	 * refuses the tenant instead of reading compressed bytes as values */
	put_le32(buf + 8, atomic_load(&db->meta_v4) ? 4 : atomic_load(&db->meta_v3) ? 3 : 2);
	put_le32(buf + 12, (uint32_t)n);
	put_le64(buf + 16, atomic_load(&db->compact_floor));
	put_le64(buf + 24, mark);
	put_le32(buf + 32, db->active != NULL ? db->active->id : 0);
	put_le32(buf + 36, db->merge_from);
	put_le64(buf + 40, db->merge_from ? db->merge_seq + 1 : 0);
	n = 0;
	for (i = 0; i < db->nsegs; i++) {
		const struct seg *s = db->segs[i];
		uint8_t *p;
		if (!s->sealed || s->retired || s == db->active)
			continue;
		p = buf + META_V2_HEAD + n++ * META_V2_ENTRY;
		put_le32(p, s->id);
		put_le64(p + 8, s->lost ? s->lost_size : s->size);
	}
	pthread_mutex_unlock(&db->seg_mu);
	put_le32(buf + len - 4, crc32c(buf, len - 4));
	*ret = buf;
	*ret_len = len;
	return 0;
}

int manifest_write(kv_db *db)
{
	uint64_t mark = db->version_mark, want = db->next_version - 1 + MANIFEST_MARK_STEP;
	uint8_t *buf;
	size_t len;
	int rv;

	if (mark < db->next_version - 1 + MANIFEST_MARK_STEP / 2)
		mark = want;
	if ((rv = manifest_encode(db, mark, &buf, &len)) != 0)
		return rv;
	if (db->meta != NULL && db->meta_len == len && memcmp(db->meta, buf, len) == 0) {
		free(buf);
		return 0;
	}
	if ((rv = stor_meta_put(db->tn, "META", buf, len, KV_STOR_DURABLE)) != 0) {
		free(buf);
		return rv;
	}
	free(db->meta);
	db->meta = buf;
	db->meta_len = len;
	db->version_mark = mark;
	return 0;
}
