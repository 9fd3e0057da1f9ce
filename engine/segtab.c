/*
 * segtab.c — a database's segment table and what hangs off it: finding,
 * inserting and removing segments (under seg_mu), a reader's reference on
 * the segment that holds a location (following relocations), mapped reads,
 * the hint files of sealed segments, and syncing the directory that holds
 * them all. Called by every module of the engine; calls none of them back
 * (segment.c, hint.c, reloc.c and io.c sit below it).
 */
#include "db.h"

#include "hint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int db_fsync_dir(kv_db *db)
{
	return stor_tenant_sync(db->tn);
}

/* ---- segment table ----------------------------------------------------- */

static size_t segtab_lower(kv_db *db, uint32_t id)
{
	size_t lo = 0, hi = db->nsegs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (db->segs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct seg *segtab_find_locked(kv_db *db, uint32_t id)
{
	size_t i = segtab_lower(db, id);

	return i < db->nsegs && db->segs[i]->id == id ? db->segs[i] : NULL;
}

int segtab_insert_locked(kv_db *db, struct seg *s)
{
	size_t i;

	if (db->nsegs == db->capsegs) {
		size_t cap = db->capsegs ? db->capsegs * 2 : 16;
		struct seg **nv = realloc(db->segs, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		db->segs = nv;
		db->capsegs = cap;
	}
	i = segtab_lower(db, s->id);
	memmove(db->segs + i + 1, db->segs + i, (db->nsegs - i) * sizeof(*db->segs));
	db->segs[i] = s;
	db->nsegs++;
	return 0;
}

void segtab_remove_locked(kv_db *db, uint32_t id)
{
	size_t i = segtab_lower(db, id);

	if (i >= db->nsegs || db->segs[i]->id != id)
		return;
	seg_unref(db->segs[i]);
	memmove(db->segs + i, db->segs + i + 1, (db->nsegs - i - 1) * sizeof(*db->segs));
	db->nsegs--;
}

int db_seg_acquire(kv_db *db, uint64_t loc, struct seg **ret_seg, uint64_t *ret_loc)
{
	struct seg *s;
	int hops;

	pthread_mutex_lock(&db->seg_mu);
	for (hops = 0; hops < 4; hops++) {
		uint64_t to;
		if ((s = segtab_find_locked(db, loc_seg(loc))) != NULL) {
			int rv = seg_pin(s);
			if (rv < 0) {
				pthread_mutex_unlock(&db->seg_mu);
				return rv == -ENOENT ? -EIO : rv;
			}
			seg_ref(s);
			pthread_mutex_unlock(&db->seg_mu);
			*ret_seg = s;
			*ret_loc = loc;
			return 0;
		}
		if (reloc_get(&db->reloc, loc, &to) != 0)
			break;
		loc = to;
	}
	pthread_mutex_unlock(&db->seg_mu);
	return -ENOENT;
}

void db_seg_map(kv_db *db, struct seg *s, bool active)
{
	uint64_t len = s->size;

	if (!db->map_reads)
		return;
	/* the active segment grows: map as far as it will be appended to */
	if (active && len < db->opt.segment_size)
		len = db->opt.segment_size;
	seg_map_set(s, len);
}

void db_seg_release(struct seg *s)
{
	if (s == NULL)
		return;
	seg_unpin(s);
	seg_unref(s);
}

/* ---- hint files for sealed segments ------------------------------------ */

struct hint_gen {
	struct hint_writer w;
};

static int hint_gen_rec(void *arg, const struct seg_scan_rec *r)
{
	struct hint_gen *g = arg;
	struct hint_ent e = {
	        .type = r->h.type,
	        .flags = r->h.flags,
	        .key_len = r->h.key_len,
	        .version = r->h.version,
	        .off = (uint32_t)r->off,
	        .size = (uint32_t)r->size,
	        .expiry_ms = r->h.expiry_ms,
	        .key = r->key,
	};
	return hint_writer_add(&g->w, &e);
}

/* A damaged record whose header still checks out keeps its entry, so reads
 * of its key report the damage (DATA_LOSS) rather than an older value. */
static int hint_gen_damage(void *arg, uint64_t off, uint64_t len, const struct seg_scan_rec *r)
{
	(void)off;
	(void)len;
	if (r == NULL)
		return 0;
	return hint_gen_rec(arg, r);
}

/* Scans one sealed segment and writes its hint file. */
static int write_hint(kv_db *db, struct seg *s)
{
	struct hint_gen g;
	struct seg_scan_result res;
	struct hint_writer *ready;
	int rv;

	pthread_mutex_lock(&db->seg_mu);
	ready = s->hint_ready;
	s->hint_ready = NULL;
	pthread_mutex_unlock(&db->seg_mu);
	if (ready != NULL) {
		/* collected as its batches landed: no need to read it back */
		rv = hint_writer_finish(ready, db->tn, s->id);
		hint_writer_release(ready);
		free(ready);
		return rv;
	}
	if ((rv = seg_pin(s)) < 0)
		return rv;
	hint_writer_init(&g.w);
	/* a sealed segment was synced when it was sealed (write_roll, close) */
	rv = seg_scan(s->h, s->size, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, false, hint_gen_rec,
	              hint_gen_damage, &g, &res);
	seg_unpin(s);
	if (rv == 0)
		rv = hint_writer_finish(&g.w, db->tn, s->id);
	hint_writer_release(&g.w);
	return rv;
}

int db_write_hints(kv_db *db)
{
	struct seg **todo = NULL;
	size_t n = 0, i;
	int rv = 0, wrote = 0;

	pthread_mutex_lock(&db->seg_mu);
	if (db->nsegs > 0 && (todo = malloc(db->nsegs * sizeof(*todo))) == NULL) {
		pthread_mutex_unlock(&db->seg_mu);
		return -ENOMEM;
	}
	for (i = 0; i < db->nsegs; i++) {
		struct seg *s = db->segs[i];
		if (s->sealed && !s->has_hint && !s->retired) {
			seg_ref(s);
			todo[n++] = s;
		}
	}
	pthread_mutex_unlock(&db->seg_mu);
	for (i = 0; i < n; i++) {
		if (rv == 0) {
			rv = write_hint(db, todo[i]);
			if (rv == 0) {
				pthread_mutex_lock(&db->seg_mu);
				todo[i]->has_hint = true;
				pthread_mutex_unlock(&db->seg_mu);
				wrote++;
			}
		}
		seg_unref(todo[i]);
	}
	free(todo);
	(void)wrote; /* a hint lost with its directory entry only costs a scan */
	return rv;
}

