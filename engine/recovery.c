/*
 * recovery.c — what kv_open does to a directory before the first request.
 *
 *   1. Remove *.tmp leftovers of interrupted writes.
 *   2. Apply merge commit files: delete the segments they retired that are
 *      still there (a merge interrupted after its commit), load relocations.
 *   3. Read META (manifest.h): compact revision, the sealed segments and
 *      their sizes, the version mark.
 *   4. When the key-directory image of the last clean close matches what
 *      is there (kdimage.c), take the directory from it and open the
 *      segments without reading them. Otherwise load every segment, oldest
 *      id first: from its hint file when the hint
 *      checks out, otherwise by scanning its records. For every key the
 *      record with the highest version wins; an equal version (a copy left by
 *      an interrupted merge) keeps the first one seen. A hint that cannot be
 *      read only means a scan.
 *   5. A sealed segment (META lists it, or it has a hint) that is gone,
 *      unreadable or shorter than it was is damage: it is reported with its
 *      file name, and the records its hint names beyond what is left stay
 *      indexed, so reads of their keys report the loss (KV_ECORRUPT) instead
 *      of an older value or none. A lost segment stays in the table as a
 *      placeholder (seg->lost) and in META, so the loss is reported again
 *      at every open.
 *   6. Records of an atomic batch are indexed only when the batch's last
 *      record is present. Only the active segment (the newest non-merged
 *      one that is not sealed) can end in a torn write: it is cut back to
 *      the end of its last complete batch, and the cut is reported. Damage
 *      inside any other segment is skipped and reported, never indexed.
 *   7. The next version is one past the highest version seen in any record or
 *      segment header, so versions never repeat even when merge dropped the
 *      newest records; when segments were lost, one past META's mark too.
 *   8. The newest non-merged segment becomes the active segment again if it
 *      was the active one and has room. Otherwise a new one is started.
 *      META is written anew when it changed.
 *   9. Blob chunks are never indexed (step 4 passes them by); the
 *      descriptors that ended up heads are read, and their chunk bytes
 *      counted live (blob.h invariant 3).
 * recovery_run is this list: one function per step, in this order.
 * Runs single-threaded inside kv_open, before the handle is published.
 */
#include "db.h"

#include "hint.h"
#include "kdimage.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pend {
	uint8_t *key;
	uint32_t key_len;
	struct kd_entry e;
};

struct rctx {
	kv_db *db;
	uint32_t seg;
	struct pend *p;
	size_t np, cap;
	uint64_t pend_start; /* offset of the first record of the open batch */
	uint64_t max_version;
	uint64_t records;
	uint64_t seg_base; /* the segment being loaded: its base version and size */
	uint64_t seg_size;
	uint64_t hint_end; /* end of the last record the loaded hint names */
	/* a merge that never committed: its outputs have ids ≥ merge_from;
	 * the segments newer records point into (their previous versions) */
	uint32_t merge_from;
	bool seg_merged;
	uint32_t *refs;
	size_t nrefs, caprefs;
	/* descriptors indexed: which are heads, and their chunk bytes, is
	 * known only at the end (blob.h invariant 3) */
	struct blob_cand {
		uint8_t *key;
		uint32_t key_len;
		uint64_t loc;
	} *blobs;
	size_t nblobs, capblobs;
};

static int index_entry(kv_db *db, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct kd_entry old;
	bool replaced;
	int rv;

	/* Segments load oldest first, so the record at hand is nearly always
	 * the newest yet: put it, and put the old entry back in the rare case
	 * (merge outputs, a merge's duplicates) where it was newer. */
	if ((rv = keydir_put(db->kd, key, len, e, &old, &replaced)) != 0)
		return rv;
	if (replaced && old.version >= e->version)
		return keydir_put(db->kd, key, len, &old, NULL, NULL);
	db_account(db, e, &old, replaced);
	return 0;
}

static void pend_clear(struct rctx *c)
{
	size_t i;

	for (i = 0; i < c->np; i++)
		free(c->p[i].key);
	c->np = 0;
}

static int blob_cand_add(struct rctx *c, const uint8_t *key, uint32_t key_len, uint64_t loc)
{
	struct blob_cand *b;

	if (c->nblobs == c->capblobs) {
		size_t cap = c->capblobs ? c->capblobs * 2 : 16;
		struct blob_cand *nv = realloc(c->blobs, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		c->blobs = nv;
		c->capblobs = cap;
	}
	b = &c->blobs[c->nblobs];
	if ((b->key = malloc(key_len)) == NULL)
		return -ENOMEM;
	memcpy(b->key, key, key_len);
	b->key_len = key_len;
	b->loc = loc;
	c->nblobs++;
	return 0;
}

/* The descriptors that ended up heads: their chunk bytes are live. A
 * descriptor that cannot be read counts none (its reads report it). */
static int blob_heads_load(kv_db *db, struct rctx *c)
{
	size_t i;
	int rv;

	for (i = 0; i < c->nblobs; i++) {
		struct blob_cand *b = &c->blobs[i];
		struct kd_entry e;
		struct rec_read r;
		struct blob_desc d;
		if (keydir_get(db->kd, b->key, b->key_len, &e) != 0 ||
		    loc_make(e.seg, e.off) != b->loc)
			continue;
		rv = read_at(db, b->loc, b->key, b->key_len, true, &r);
		if (rv == -ENOMEM)
			return rv;
		if (rv != 0)
			continue;
		if (r.h.type == REC_BLOB && blob_desc_parse(r.value, r.h.value_len, &d) == 0) {
			if ((rv = blobmap_put(&db->blob_heads, b->loc, d.stored)) != 0) {
				rec_read_release(&r);
				return rv;
			}
			db->live_bytes += d.stored;
		}
		rec_read_release(&r);
	}
	return 0;
}

static void blob_cands_release(struct rctx *c)
{
	for (size_t i = 0; i < c->nblobs; i++)
		free(c->blobs[i].key);
	free(c->blobs);
}

static int index_source(struct rctx *c, uint8_t type, uint8_t flags, const uint8_t *key,
                        uint32_t key_len, uint64_t version, uint64_t off, uint64_t size,
                        uint64_t expiry)
{
	struct kd_entry e = {
	        .version = version,
	        .seg = c->seg,
	        .off = (uint32_t)off,
	        .size = (uint32_t)size,
	        .flags = (type == REC_DELETE ? KD_F_TOMBSTONE : 0) | (expiry ? KD_F_TTL : 0),
	        .expiry_ms = expiry,
	};
	size_t i;
	int rv;

	if (version > c->max_version)
		c->max_version = version;
	c->records++;
	if (type == REC_CHUNK) {
		/* never indexed; the last record of a request of chunks ends it */
		if (flags & REC_F_BATCH_MORE)
			return 0;
		for (i = 0; i < c->np; i++)
			if ((rv = index_entry(c->db, c->p[i].key, c->p[i].key_len, &c->p[i].e)) != 0)
				return rv;
		pend_clear(c);
		return 0;
	}
	if (type == REC_BLOB &&
	    (rv = blob_cand_add(c, key, key_len, loc_make(c->seg, (uint32_t)off))) != 0)
		return rv;
	if (flags & REC_F_BATCH_MORE) {
		struct pend *p;
		if (c->np == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 16;
			struct pend *np = realloc(c->p, cap * sizeof(*np));
			if (np == NULL)
				return -ENOMEM;
			c->p = np;
			c->cap = cap;
		}
		if (c->np == 0)
			c->pend_start = off;
		p = &c->p[c->np];
		if ((p->key = malloc(key_len)) == NULL)
			return -ENOMEM;
		memcpy(p->key, key, key_len);
		p->key_len = key_len;
		p->e = e;
		c->np++;
		return 0;
	}
	for (i = 0; i < c->np; i++)
		if ((rv = index_entry(c->db, c->p[i].key, c->p[i].key_len, &c->p[i].e)) != 0)
			return rv;
	pend_clear(c);
	return index_entry(c->db, key, key_len, &e);
}

static int push_id(uint32_t **v, size_t *n, size_t *cap, uint32_t id);

static int scan_rec(void *arg, const struct seg_scan_rec *r)
{
	struct rctx *c = arg;
	int rv;

	/* a record written while the merge ran may point at an output's copy */
	if (c->merge_from && !c->seg_merged && r->h.prev_seg >= c->merge_from &&
	    (c->nrefs == 0 || c->refs[c->nrefs - 1] != r->h.prev_seg) &&
	    (rv = push_id(&c->refs, &c->nrefs, &c->caprefs, r->h.prev_seg)) != 0)
		return rv;
	return index_source(arg, r->h.type, r->h.flags, r->key, r->h.key_len, r->h.version, r->off,
	                    r->size, r->h.expiry_ms);
}

/* A damaged record whose header still checks out is indexed (without its
 * batch flag: it cannot be told apart), so a read of its key reports the
 * damage instead of returning the key's previous value. Its version must be
 * one this segment could hold. */
static int scan_damage(void *arg, uint64_t off, uint64_t len, const struct seg_scan_rec *r)
{
	struct rctx *c = arg;

	(void)len;
	if (r == NULL || r->h.version <= c->seg_base ||
	    r->h.version > c->seg_base + c->seg_size / REC_HEADER_SIZE)
		return 0;
	return index_source(c, r->h.type, (uint8_t)(r->h.flags & ~REC_F_BATCH_MORE), r->key,
	                    r->h.key_len, r->h.version, off, r->size, r->h.expiry_ms);
}

static int hint_rec(void *arg, const struct hint_ent *e)
{
	struct rctx *c = arg;

	if ((uint64_t)e->off + e->size > c->hint_end)
		c->hint_end = (uint64_t)e->off + e->size;
	return index_source(arg, e->type, e->flags, e->key, e->key_len, e->version, e->off, e->size,
	                    e->expiry_ms);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct listing {
	uint32_t *segs;
	size_t nsegs, capsegs;
	uint32_t *hints;
	size_t nhints, caphints;
	char **commits;
	size_t ncommits, capcommits;
};

static void listing_release(struct listing *l)
{
	size_t i;

	free(l->segs);
	free(l->hints);
	for (i = 0; i < l->ncommits; i++)
		free(l->commits[i]);
	free(l->commits);
}

static int push_id(uint32_t **v, size_t *n, size_t *cap, uint32_t id)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		uint32_t *nv = realloc(*v, nc * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = id;
	return 0;
}

static bool has_id(const uint32_t *v, size_t n, uint32_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == id;
}

struct list_ctx {
	kv_db *db;
	struct listing *l;
};

/* Sorts one entry of the tenant's listing into l; leftovers of interrupted
 * writes are removed. */
static int list_entry(void *arg, const struct kv_stor_entry *e)
{
	struct list_ctx *x = arg;
	struct listing *l = x->l;
	size_t len;

	switch (e->kind) {
	case KV_STOR_PARTIAL:
		stor_meta_remove(x->db->tn, e->name);
		return 0;
	case KV_STOR_SEGMENT:
		return push_id(&l->segs, &l->nsegs, &l->capsegs, e->id);
	case KV_STOR_HINT:
		return push_id(&l->hints, &l->nhints, &l->caphints, e->id);
	case KV_STOR_META:
		len = strlen(e->name);
		if (strncmp(e->name, "merge-", 6) != 0 || len <= 13 ||
		    strcmp(e->name + len - 7, ".commit") != 0)
			return 0;
		if (l->ncommits == l->capcommits) {
			size_t cap = l->capcommits ? l->capcommits * 2 : 4;
			char **nv = realloc(l->commits, cap * sizeof(*nv));
			if (nv == NULL)
				return -ENOMEM;
			l->commits = nv;
			l->capcommits = cap;
		}
		if ((l->commits[l->ncommits] = strdup(e->name)) == NULL)
			return -ENOMEM;
		l->ncommits++;
		return 0;
	}
	return 0;
}

/* 1. The tenant's segments, hints and merge commits, each list sorted;
 * leftovers of interrupted writes are removed on the way. */
static int list_dir(kv_db *db, struct listing *l)
{
	struct list_ctx x = {db, l};
	int rv;

	if ((rv = stor_list(db->tn, list_entry, &x)) != 0)
		return rv;
	if (l->nsegs > 1)
		qsort(l->segs, l->nsegs, sizeof(*l->segs), cmp_u32);
	if (l->nhints > 1)
		qsort(l->hints, l->nhints, sizeof(*l->hints), cmp_u32);
	if (l->ncommits > 1)
		qsort(l->commits, l->ncommits, sizeof(*l->commits), cmp_str);
	return 0;
}

static bool is_retired(const uint32_t *v, size_t n, uint32_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

/* Remembers the first damaged file, for the log. */
static void note_damage(kv_db *db, uint32_t id, const char *ext)
{
	if (db->rinfo.damaged_file[0] == '\0')
		seg_name(db->rinfo.damaged_file, id, ext);
}

/* Segment errors that say "this file cannot be read" rather than "this
 * process cannot go on". */
static bool unreadable(int rv)
{
	return rv == -EISDIR || rv == -EACCES || rv == -EPERM || rv == -EIO || rv == -ENXIO ||
	       rv == -ELOOP || rv == -EINVAL || rv == -ENOTDIR;
}

/* A sealed segment that is gone or unreadable: a placeholder in the table,
 * and what its hint names indexed, so reads of those keys report the loss.
 * size: as META listed it, 0 when unknown. */
static int load_lost(kv_db *db, struct rctx *c, uint32_t id, uint64_t size)
{
	struct seg *s;
	int rv;

	if ((rv = seg_new_lost(db->tn, id, size, &s)) != 0)
		return rv;
	c->seg = id;
	c->hint_end = 0;
	rv = hint_load(db->tn, id, 1ull << 32, KV_KEY_SIZE_MAX, hint_rec, c);
	if (rv == -ENOMEM) {
		seg_unref(s);
		return rv;
	}
	pend_clear(c);
	if (size == 0)
		s->lost_size = size = c->hint_end;
	db->rinfo.lost_segments++;
	db->rinfo.lost_bytes += size;
	db->has_lost = true;
	note_damage(db, id, ".seg");
	db->rinfo.segments++;
	if ((rv = segtab_insert_locked(db, s)) != 0)
		seg_unref(s);
	return rv;
}

/* ---- the outputs of a merge that never committed -------------------------- */

/* A record of an output: its version, where it is, where its original is
 * (0: not found yet). Versions are unique in a database, and a copy keeps
 * its original's version. */
struct moved {
	uint64_t version, from, to;
};

struct moved_list {
	struct moved *v;
	size_t n, cap;
	uint32_t seg; /* the segment being read */
};

static int moved_push(struct moved_list *ml, uint64_t version, uint64_t off)
{
	if (ml->n == ml->cap) {
		size_t cap = ml->cap ? ml->cap * 2 : 1024;
		struct moved *nv = realloc(ml->v, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		ml->v = nv;
		ml->cap = cap;
	}
	ml->v[ml->n++] = (struct moved){version, loc_make(ml->seg, (uint32_t)off), 0};
	return 0;
}

/* (A blob chunk, version 0, is never pointed at but by its descriptor,
 * and a copied descriptor is relocated to its original, which names the
 * original chunks: chunks are left out.) */
static int moved_hint(void *arg, const struct hint_ent *e)
{
	return e->type == REC_CHUNK ? 0 : moved_push(arg, e->version, e->off);
}

static int moved_scan(void *arg, const struct seg_scan_rec *r)
{
	return r->h.type == REC_CHUNK ? 0 : moved_push(arg, r->h.version, r->off);
}

static void moved_found(struct moved_list *ml, uint64_t version, uint64_t off)
{
	size_t lo = 0, hi = ml->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ml->v[mid].version < version)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < ml->n && ml->v[lo].version == version && ml->v[lo].to == 0)
		ml->v[lo].to = loc_make(ml->seg, (uint32_t)off);
}

static int found_hint(void *arg, const struct hint_ent *e)
{
	moved_found(arg, e->version, e->off);
	return 0;
}

static int found_scan(void *arg, const struct seg_scan_rec *r)
{
	moved_found(arg, r->h.version, r->off);
	return 0;
}

static int cmp_moved(const void *a, const void *b)
{
	uint64_t x = ((const struct moved *)a)->version, y = ((const struct moved *)b)->version;
	return x < y ? -1 : x > y;
}

/* The records of s, to hfn from its hint or else to sfn by a scan. */
static int seg_records(kv_db *db, struct seg *s, hint_visit_fn hfn, seg_scan_fn sfn, void *arg)
{
	struct seg_scan_result res;
	int rv;

	rv = hint_load(db->tn, s->id, 1ull << 32, KV_KEY_SIZE_MAX, hfn, arg);
	if (rv == 0 || rv == -ENOMEM)
		return rv;
	if ((rv = seg_pin(s)) < 0)
		return rv;
	rv = seg_scan(s->h, s->size, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, 0, sfn, NULL, arg, &res);
	seg_unpin(s);
	return rv;
}

static void drop_files(kv_db *db, uint32_t id)
{
	stor_seg_remove(db->tn, id, 0);
	stor_hint_remove(db->tn, id);
}

/* Retires the outputs in `out` with a commit of its own that relocates each
 * of their records to its original in the set, so that the records written
 * while the merge ran, which point at the copies, reach the originals. When
 * an original cannot be found, nothing changes. */
static int retire_referenced(kv_db *db, struct rctx *c, uint32_t *out, size_t nout)
{
	struct moved_list ml = {0};
	struct merge_commit mc = {0};
	struct reloc_ent *old = NULL;
	size_t nold = 0, i;
	int rv = 0;

	for (i = 0; i < nout && rv == 0; i++) {
		ml.seg = out[i];
		rv = seg_records(db, segtab_find_locked(db, out[i]), moved_hint, moved_scan, &ml);
	}
	if (rv != 0)
		goto out;
	qsort(ml.v, ml.n, sizeof(*ml.v), cmp_moved);
	for (i = 0; i < db->nsegs && rv == 0; i++) {
		struct seg *s = db->segs[i];
		if (s->id >= c->merge_from || s->lost)
			continue;
		ml.seg = s->id;
		rv = seg_records(db, s, found_hint, found_scan, &ml);
	}
	if (rv != 0)
		goto out;
	for (i = 0; i < ml.n; i++)
		if (ml.v[i].to == 0)
			goto out; /* kept, as they are: the next merge takes them */
	if ((rv = reloc_entries(&db->reloc, &old, &nold)) != 0)
		goto out;
	if ((mc.relocs = malloc((nold + ml.n + 1) * sizeof(*mc.relocs))) == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	if (nold > 0)
		memcpy(mc.relocs, old, nold * sizeof(*old));
	for (i = 0; i < ml.n; i++)
		mc.relocs[nold + i] = (struct reloc_ent){ml.v[i].from, ml.v[i].to};
	mc.nrelocs = nold + ml.n;
	mc.seq = db->merge_seq + 1;
	mc.retired = out;
	mc.nretired = nout;
	if ((rv = commit_write(db->tn, &mc)) != 0)
		goto out;
	db->merge_seq = mc.seq;
	for (i = 0; i < ml.n && rv == 0; i++)
		rv = reloc_put(&db->reloc, ml.v[i].from, ml.v[i].to);
	for (i = 0; i < nout; i++) {
		struct seg *s = segtab_find_locked(db, out[i]);
		db->disk_bytes -= s->size;
		db->rinfo.merge_leftovers++;
		segtab_remove_locked(db, out[i]);
		drop_files(db, out[i]);
	}
out:
	free(old);
	free(mc.relocs);
	free(ml.v);
	return rv;
}

/* The outputs of a merge that never committed are copies of records its set
 * still holds (a copy and its original have the same version, and the
 * original, seen first, is the one indexed). Each output no newer record
 * points into is removed; the others are retired with relocations to the
 * originals (retire_referenced). So a kvd killed again and again in the
 * middle of merges does not pile copies up. refs_known: c->refs lists every
 * output a newer record points into (false: assume all of them). */
static int drop_merge_outputs(kv_db *db, struct rctx *c, bool refs_known)
{
	uint32_t *kept = NULL;
	size_t nkept = 0, capkept = 0, i = 0, j;
	uint32_t dropped = 0;
	int rv = 0;

	while (i < db->nsegs) {
		struct seg *s = db->segs[i];
		bool referenced = !refs_known;
		uint32_t id = s->id;

		if (id < c->merge_from || !(s->flags & SEG_F_MERGED) || s->lost) {
			i++;
			continue;
		}
		for (j = 0; j < c->nrefs; j++)
			referenced |= c->refs[j] == id;
		if (referenced) {
			if ((rv = push_id(&kept, &nkept, &capkept, id)) != 0)
				goto out;
			i++;
			continue;
		}
		db->disk_bytes -= s->size;
		db->rinfo.merge_leftovers++;
		segtab_remove_locked(db, id);
		drop_files(db, id);
		dropped++;
	}
	if (nkept > 0 && (rv = retire_referenced(db, c, kept, nkept)) != 0)
		goto out;
	if (dropped > 0)
		rv = db_fsync_dir(db);
out:
	free(kept);
	return rv;
}

/* ---- the steps of recovery_run ------------------------------------------ */

/* What the steps of recovery_run hand on to each other. */
struct recovery {
	kv_db *db;
	struct listing l;  /* step 1: the directory's segments, hints and commits */
	uint32_t *retired; /* step 2: the segments merge commits retired */
	size_t nretired;
	struct manifest man; /* step 3 */
	bool have_man;       /* META is there and of format 2 */
	uint32_t *ids;       /* every segment id there is a trace of, sorted */
	size_t nids, capids;
	struct rctx c; /* step 4: the records being indexed */
	uint32_t max_id;
	uint64_t max_base;    /* the highest base version of a segment header */
	struct seg *tail;     /* the newest non-merged, undamaged segment */
	struct seg *junk_seg; /* a segment ending in damage: a torn write if it is the tail */
	uint64_t junk_from;
	bool lossy;        /* a sealed segment, or part of one, is lost */
	bool outputs_seen; /* every pointer into a merge's outputs was seen */
};

/* 2. Merge commits: their relocations are loaded, and the segments they
 * retired collected (step 4 deletes whatever of those is left). */
static int apply_merge_commits(struct recovery *r)
{
	kv_db *db = r->db;
	size_t i, j;
	int rv;

	for (i = 0; i < r->l.ncommits; i++) {
		struct merge_commit mc;
		rv = commit_load(db->tn, r->l.commits[i], &mc);
		if (rv == KV_ECORRUPT) {
			/* written under a temporary name and renamed after fsync: a
			 * damaged one is disk corruption; without it the retired
			 * segments are kept, which only duplicates data */
			db->rinfo.corrupt_records++;
			continue;
		}
		if (rv != 0)
			return rv;
		if (mc.seq > db->merge_seq)
			db->merge_seq = mc.seq;
		for (j = 0; j < mc.nrelocs && rv == 0; j++)
			rv = reloc_put(&db->reloc, mc.relocs[j].from, mc.relocs[j].to);
		if (rv == 0 && mc.nretired > 0) {
			uint32_t *nv =
			        realloc(r->retired, (r->nretired + mc.nretired) * sizeof(*nv));
			if (nv == NULL) {
				rv = -ENOMEM;
			} else {
				r->retired = nv;
				memcpy(r->retired + r->nretired, mc.retired,
				       mc.nretired * sizeof(*nv));
				r->nretired += mc.nretired;
			}
		}
		commit_release(&mc);
		if (rv != 0)
			return rv;
	}
	return 0;
}

/* 3. META: the compact revision, the version mark, the sealed segments. A
 * damaged META fails the open: loading without it would forget the compact
 * revision (reads below it would see a history merge cut) and the version
 * mark. Removing the file is the operator's choice. */
static int read_meta(struct recovery *r)
{
	kv_db *db = r->db;
	int rv;

	rv = manifest_read(db->tn, &r->man);
	if (rv != 0 && rv != -ENOENT)
		return rv;
	r->have_man = r->man.format >= 2;
	atomic_store(&db->meta_v3, r->man.format >= 3); /* sticky */
	atomic_store(&db->meta_v4, r->man.format == 4);
	/* a merge ran and never committed: its commit would have been the next */
	if (r->have_man && r->man.merge_from != 0 && db->merge_seq + 1 == r->man.merge_seq)
		r->c.merge_from = r->man.merge_from;
	atomic_store(&db->compact_floor, r->man.floor);
	db->version_mark = r->man.version_mark;
	if (r->have_man) {
		db->meta = r->man.raw;
		db->meta_len = r->man.raw_len;
		r->man.raw = NULL;
	}
	return 0;
}

/* Every id there is a trace of: segments, hints, what META lists; sorted,
 * with repeats. */
static int gather_ids(struct recovery *r)
{
	size_t i;
	int rv = 0;

	for (i = 0; i < r->l.nsegs && rv == 0; i++)
		rv = push_id(&r->ids, &r->nids, &r->capids, r->l.segs[i]);
	for (i = 0; i < r->l.nhints && rv == 0; i++)
		rv = push_id(&r->ids, &r->nids, &r->capids, r->l.hints[i]);
	for (i = 0; i < r->man.nsegs && rv == 0; i++)
		rv = push_id(&r->ids, &r->nids, &r->capids, r->man.segs[i].id);
	if (rv == 0 && r->nids > 1)
		qsort(r->ids, r->nids, sizeof(*r->ids), cmp_u32);
	return rv;
}

/* 4 and 6. The records of an opened segment, indexed from its hint or else
 * by a scan; damage found by the scan is counted, and a damaged end of what
 * may be the active segment remembered in junk_seg. *expect grows to what
 * the hint says should be there. On failure the caller drops s. */
static int index_segment(struct recovery *r, struct seg *s, bool listed, bool sealed, bool damaged,
                         uint64_t *expect)
{
	kv_db *db = r->db;
	struct rctx *c = &r->c;
	struct seg_scan_result res;
	bool active, backend_sealed;
	int rv;

	c->seg = s->id;
	c->seg_merged = (s->flags & SEG_F_MERGED) != 0;
	c->hint_end = 0;
	/* a sealed segment's hint says what should be there, also past a
	 * cut: its offsets are bounded by what a segment can hold */
	rv = hint_load(db->tn, s->id, sealed ? 1ull << 32 : s->size, KV_KEY_SIZE_MAX, hint_rec, c);
	if (rv == 0) {
		s->has_hint = true;
		db->rinfo.hints_loaded++;
		if (c->hint_end > *expect)
			*expect = c->hint_end;
		if (c->merge_from && s->id >= c->merge_from && !c->seg_merged)
			r->outputs_seen = false; /* its records' pointers are not in the hint */
		return 0;
	}
	if (rv == -ENOMEM)
		return rv;
	if (rv != -ENOENT)
		db->rinfo.hints_rejected++;
	pend_clear(c);
	/* a rejected hint indexed nothing (it is checked whole first) */
	c->seg_base = s->base_version;
	c->seg_size = s->size;
	/* the segment being written: a hole past its last sync mark is where
	 * unsynced writes were lost, not damage (one the backend knows was
	 * sealed at its length is not being written: storage.h kv_stor_seg.sealed) */
	backend_sealed = s->h != NULL && s->h->sealed;
	active = !sealed && !backend_sealed && !(s->flags & SEG_F_MERGED) && !damaged &&
	         (r->have_man || s->id == r->l.segs[r->l.nsegs - 1]);
	rv = seg_scan(s->h, s->size, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX,
	              active ? SEG_SCAN_ACTIVE : 0, scan_rec, scan_damage, c, &res);
	if (rv != 0)
		return rv;
	db->rinfo.segments_scanned++;
	db->rinfo.corrupt_records += res.corrupt_records;
	db->rinfo.corrupt_bytes += res.corrupt_bytes;
	if (res.corrupt_records)
		note_damage(db, s->id, ".seg");
	if (c->np > 0) {
		/* a batch without its last record */
		res.valid_end = c->pend_start;
		pend_clear(c);
	}
	if (res.valid_end < s->size) {
		if (!listed && !backend_sealed && !(s->flags & SEG_F_MERGED) && !damaged) {
			/* a torn write if this turns out to be the active
			 * segment; decided after the loop */
			r->junk_seg = s;
			r->junk_from = res.valid_end;
		} else {
			db->rinfo.corrupt_records++;
			db->rinfo.corrupt_bytes += s->size - res.valid_end;
			note_damage(db, s->id, ".seg");
		}
	}
	return 0;
}

/* 4 and 5. One segment id: retired ones are removed, lost ones become
 * placeholders, the others are opened, indexed and put in the table. */
static int load_segment(struct recovery *r, uint32_t id)
{
	kv_db *db = r->db;
	const struct manifest_seg *listed = manifest_find(&r->man, id);
	bool present = has_id(r->l.segs, r->l.nsegs, id);
	bool hinted = has_id(r->l.hints, r->l.nhints, id);
	bool sealed = listed != NULL || hinted;
	uint64_t expect = listed ? listed->size : 0;
	struct seg *s;
	bool damaged = false;
	int rv;

	if (is_retired(r->retired, r->nretired, id)) {
		drop_files(db, id);
		return 0;
	}
	if (!present) {
		if (listed == NULL && r->have_man) {
			/* a hint whose segment a merge retired, its commit
			 * since replaced: nothing of it is live */
			stor_hint_remove(db->tn, id);
			return 0;
		}
		r->lossy = true;
		return load_lost(db, &r->c, id, expect);
	}
	rv = seg_open(db->tn, id, &s);
	if (rv == KV_ECORRUPT) {
		if ((rv = seg_open_raw(db->tn, id, &s)) != 0) {
			if (!unreadable(rv))
				return rv;
			r->lossy = true;
			return load_lost(db, &r->c, id, expect);
		}
		if (s->size < SEG_HEADER_SIZE) {
			seg_unref(s);
			if (sealed) {
				/* it had data: evidence, not a leftover */
				r->lossy = true;
				return load_lost(db, &r->c, id, expect);
			}
			/* a crash while the segment was being created: no
			 * record can have been acknowledged in it */
			stor_seg_remove(db->tn, id, 0);
			return 0;
		}
		damaged = true;
		db->rinfo.corrupt_records++;
		db->rinfo.corrupt_bytes += SEG_HEADER_SIZE;
		note_damage(db, id, ".seg");
	} else if (unreadable(rv)) {
		r->lossy = true;
		return load_lost(db, &r->c, id, expect);
	} else if (rv != 0) {
		return rv;
	}
	if (s->base_version > r->max_base)
		r->max_base = s->base_version;
	if ((rv = index_segment(r, s, listed != NULL, sealed, damaged, &expect)) != 0) {
		seg_unref(s);
		return rv;
	}
	if (expect > s->size) {
		/* cut short after it was sealed */
		db->rinfo.lost_bytes += expect - s->size;
		note_damage(db, id, ".seg");
		r->lossy = true;
	}
	pend_clear(&r->c);
	seg_unpin(s); /* the file budget may close it until it is read again */
	db->rinfo.segments++;
	s->sealed = true;
	db->disk_bytes += s->size;
	if ((rv = segtab_insert_locked(db, s)) != 0) {
		seg_unref(s);
		return rv;
	}
	if (!(s->flags & SEG_F_MERGED) && !damaged) {
		if (r->junk_seg != NULL && r->junk_seg != s) {
			/* damage at the end of a segment that is not the newest */
			db->rinfo.corrupt_records++;
			db->rinfo.corrupt_bytes += r->junk_seg->size - r->junk_from;
			note_damage(db, r->junk_seg->id, ".seg");
			r->junk_seg = NULL;
		}
		r->tail = s;
	}
	return 0;
}

/* 4, 5 and 6. Every segment there is a trace of, oldest id first. */
static int load_segments(struct recovery *r)
{
	size_t i;
	int rv;

	for (i = 0; i < r->nids; i++) {
		uint32_t id = r->ids[i];
		if (i > 0 && r->ids[i - 1] == id)
			continue;
		if (id > r->max_id)
			r->max_id = id;
		if ((rv = load_segment(r, id)) != 0)
			return rv;
	}
	return 0;
}

/* 4 from the key-directory image (kdimage.c) instead of the segments' hints:
 * when the segments there are a trace of are exactly the image's, each is
 * opened and put in the table as load_segment does, and none is read.
 * *used stays false, and nothing changed, when there is no image or it does
 * not match (it is gone all the same: kdimage.c invariant 2). */
static int load_image(struct recovery *r, bool *used)
{
	kv_db *db = r->db;
	struct kdimage im;
	struct seg **v = NULL;
	struct keydir *kd = NULL;
	uint32_t n = 0, i;
	size_t k = 0;
	int rv;

	*used = false;
	if ((rv = kdimage_take(db, &im)) != 0)
		return rv == -ENOMEM ? rv : 0;
	if (r->c.merge_from != 0 || (v = calloc(im.nsegs + 1, sizeof(*v))) == NULL)
		goto skip;
	for (i = 0; i < im.nsegs; i++) {
		uint32_t id, flags;
		uint64_t size;
		kdimage_seg(&im, i, &id, &flags, &size);
		while (k < r->nids && k > 0 && r->ids[k] == r->ids[k - 1])
			k++;
		if (k == r->nids || r->ids[k] != id || !has_id(r->l.segs, r->l.nsegs, id) ||
		    is_retired(r->retired, r->nretired, id))
			goto skip;
		k++;
		if ((rv = seg_open(db->tn, id, &v[n])) != 0)
			goto skip;
		n++;
		if (v[n - 1]->size != size ||
		    (v[n - 1]->flags | (has_id(r->l.hints, r->l.nhints, id) ? KDIMAGE_SEG_HINT : 0)) !=
		            flags)
			goto skip;
	}
	while (k < r->nids && k > 0 && r->ids[k] == r->ids[k - 1])
		k++;
	if (k != r->nids || kdimage_keydir(&im, &kd) != 0)
		goto skip; /* a segment the image does not know, or a damaged image */
	keydir_free(db->kd);
	db->kd = kd;
	db->live_keys = im.live_keys;
	db->tombstones = im.tombstones;
	db->live_bytes = im.live_bytes;
	db->tomb_bytes = im.tomb_bytes;
	r->c.max_version = im.max_version;
	r->c.records = im.records;
	db->rinfo.keydir_image = true;
	*used = true;
	rv = 0;
	for (i = 0; i < n; i++) {
		struct seg *s = v[i];
		v[i] = NULL;
		if (s->id > r->max_id)
			r->max_id = s->id;
		if (s->base_version > r->max_base)
			r->max_base = s->base_version;
		s->has_hint = has_id(r->l.hints, r->l.nhints, s->id);
		seg_unpin(s);
		db->rinfo.segments++;
		s->sealed = true;
		db->disk_bytes += s->size;
		if ((rv = segtab_insert_locked(db, s)) != 0) {
			seg_unref(s);
			break;
		}
		if (!(s->flags & SEG_F_MERGED))
			r->tail = s;
	}
	for (; i < n; i++)
		if (v[i] != NULL)
			seg_unref(v[i]);
	free(v);
	kdimage_release(&im);
	return rv;
skip:
	for (i = 0; i < n; i++)
		seg_unref(v[i]);
	free(v);
	kdimage_release(&im);
	return rv == -ENOMEM ? rv : 0;
}

/* 5. The segment META named active is gone: what was written to it is lost. */
static void check_active_gone(struct recovery *r)
{
	kv_db *db = r->db;
	uint32_t active = r->man.active;

	if (r->have_man && active != 0 && !has_id(r->l.segs, r->l.nsegs, active) &&
	    !is_retired(r->retired, r->nretired, active) &&
	    manifest_find(&r->man, active) == NULL) {
		note_damage(db, active, ".seg");
		db->rinfo.lost_segments++;
		r->lossy = true;
	}
}

/* 6. The active segment ends in a torn write: cut it off. */
static int cut_torn_tail(struct recovery *r)
{
	kv_db *db = r->db;
	struct seg *s = r->junk_seg;
	int rv;

	if (s == NULL)
		return 0;
	if ((rv = seg_pin(s)) < 0)
		return rv;
	if ((rv = stor_seg_truncate(s->h, r->junk_from)) == 0)
		rv = stor_seg_sync(s->h);
	seg_unpin(s);
	if (rv != 0)
		return rv;
	db->rinfo.truncated_bytes += s->size - r->junk_from;
	db->disk_bytes -= s->size - r->junk_from;
	s->size = r->junk_from;
	return 0;
}

/* 7. The next segment id and the next version. */
static void set_next(struct recovery *r)
{
	kv_db *db = r->db;

	db->rinfo.records = r->c.records;
	db->next_seg_id = r->max_id + 1;
	db->next_version = (r->c.max_version > r->max_base ? r->c.max_version : r->max_base) + 1;
	if (r->lossy && r->have_man && db->next_version <= r->man.version_mark) {
		/* versions up to the mark may have been handed out in what is lost */
		db->next_version = r->man.version_mark + 1;
		db->rinfo.versions_raised = true;
	}
	atomic_store(&db->committed_version, db->next_version - 1);
}

/* On a backend that cannot append to a segment a crash left open: whether
 * the newest segment was sealed at its end when its process closed it (a
 * passivation), so that it is appended to again rather than a new one
 * started for every activation. It leaves the hint and META first, then
 * the backend's record of the seal (each durable before the next: a crash
 * in between leaves it sealed, and it is resumed or rolled over next time). */
static int resume_sealed(struct recovery *r, bool *ret)
{
	kv_db *db = r->db;
	struct seg *tail = r->tail;
	int rv;

	*ret = false;
	if (tail->size >= db->opt.segment_size || db->stor->ops->seg_reopen == NULL)
		return 0;
	if ((rv = seg_pin(tail)) < 0)
		return rv;
	if (!tail->h->sealed || tail->h->frozen) {
		/* frozen: another node's extent (a tenant taken over): a new
		 * segment takes the writes */
		seg_unpin(tail);
		return 0;
	}
	if (tail->has_hint && (rv = stor_hint_remove(db->tn, tail->id)) != 0 && rv != -ENOENT)
		goto out;
	tail->has_hint = false;
	pthread_mutex_lock(&db->seg_mu);
	tail->sealed = false;
	pthread_mutex_unlock(&db->seg_mu);
	db->active = tail; /* META leaves it out from now on */
	rv = manifest_write(db);
	db->active = NULL;
	if (rv == 0)
		rv = db->stor->ops->seg_reopen(tail->h);
	if (rv == 0)
		*ret = true;
out:
	seg_unpin(tail);
	return rv;
}

/* 8. The active segment: the newest one goes on being appended to when it
 * was the active one of a process that did not close it (it has no hint
 * and META does not list it as sealed) and the backend allows it (on a
 * device it is sealed at the length found instead); a segment that was sealed stays
 * sealed, with its hint, so that a damaged record in it is still known by
 * its key, and the first write starts a new one (write.c form_req), so an
 * open that writes nothing adds no segment. Then META is written when it
 * changed. */
static int resume_active(struct recovery *r)
{
	kv_db *db = r->db;
	struct seg *tail = r->tail;
	bool was_active = tail != NULL && !tail->lost && !tail->has_hint &&
	                  manifest_find(&r->man, tail->id) == NULL;
	bool resume = was_active && db->stor->append_reopened;
	int rv;

	if (!db->stor->append_reopened && tail != NULL && !tail->lost &&
	    (rv = resume_sealed(r, &resume)) != 0)
		return rv;
	if (resume && tail->size < db->opt.segment_size) {
		if ((rv = seg_pin(tail)) < 0)
			return rv;
		tail->sealed = false; /* the active segment stays pinned */
		db->active = tail;
		db->tail = tail->size;
		atomic_store(&db->written_loc, loc_make(tail->id, (uint32_t)tail->size));
	} else if (tail != NULL && !tail->lost && !was_active && db->stor->append_reopened) {
		/* sealed by a clean close: the first write starts the next
		 * segment (form_req), so an open that writes nothing leaves no
		 * empty segment behind and META as it was */
		db->tail = 0;
	} else {
		if (was_active && !db->stor->append_reopened) {
			/* its length is what recovery found (storage.h append_reopened) */
			if ((rv = seg_pin(tail)) < 0)
				return rv;
			rv = stor_seg_seal(tail->h, tail->size);
			seg_unpin(tail);
			if (rv != 0)
				return rv;
		}
		db->tail = 0;
		/* a full device or disk: the database opens for reads, and the
		 * first write starts a segment once there is room (form_req) */
		if ((rv = write_roll(db)) != 0 && rv != -ENOSPC)
			return rv;
	}
	return manifest_write(db);
}

int recovery_run(kv_db *db)
{
	struct recovery r = {.db = db, .c = {.db = db}, .outputs_seen = true};
	bool image;
	int rv;

	if ((rv = list_dir(db, &r.l)) != 0) /* 1 */
		goto out;
	if ((rv = apply_merge_commits(&r)) != 0) /* 2 */
		goto out;
	if ((rv = read_meta(&r)) != 0) /* 3 */
		goto out;
	if ((rv = gather_ids(&r)) != 0)
		goto out;
	if ((rv = load_image(&r, &image)) != 0) /* 4 */
		goto out;
	if (!image && (rv = load_segments(&r)) != 0) /* 4, 5, 6 */
		goto out;
	check_active_gone(&r); /* 5 */
	/* the outputs of a merge that never committed (only while its whole
	 * set is there to hold the originals) */
	if (r.c.merge_from && !r.lossy && (rv = drop_merge_outputs(db, &r.c, r.outputs_seen)) != 0)
		goto out;
	if ((rv = cut_torn_tail(&r)) != 0) /* 6 */
		goto out;
	set_next(&r);           /* 7 */
	rv = resume_active(&r); /* 8 */
	if (rv == 0)
		rv = blob_heads_load(db, &r.c); /* 9 */
out:
	blob_cands_release(&r.c);
	pend_clear(&r.c);
	free(r.c.p);
	free(r.c.refs);
	free(r.retired);
	free(r.ids);
	manifest_release(&r.man);
	listing_release(&r.l);
	return rv;
}
