/*
 * check.c — kv_check: read every file of a database without changing
 * anything, and list what is damaged.
 *
 * For each segment: its header, every record's bounds and crc (a scan of the
 * whole file), a torn end (only where recovery would see one: the newest
 * segment that is neither sealed nor written by merge), and, for a sealed
 * segment, that it is as long as META and its hint say. On a backend that
 * reports a segment left open as long as its room (a device: storage.h
 * append_reopened), what follows its last record is not a torn end but
 * room never written: a note, unless records follow a hole there. Sealed
 * segments META lists that are gone are damage. For each hint file: its
 * checksums and bounds, and that every entry names a record the segment
 * really has at that place -- reported as notes, since a hint is a cache
 * the next open rebuilds. The merge commit files and META: their checksums. The database
 * must not be open (its LOCK is taken, shared, for the duration). What
 * recovery does with each finding: recovery.c.
 */
#include "kvengine.h"

#include "codec.h"
#include "crc.h"
#include "db.h"
#include "endian_util.h"
#include "hint.h"
#include "io.h"
#include "manifest.h"
#include "reloc.h"
#include "segment.h"
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ck {
	kv_check_fn fn;
	void *arg;
	struct kv_check_summary sum;
	const char *file;
};

static void emit(struct ck *c, const char *file, uint64_t off, uint64_t len, const char *what,
                 bool damage)
{
	struct kv_check_item it;

	memset(&it, 0, sizeof(it));
	snprintf(it.file, sizeof(it.file), "%s", file);
	it.off = off;
	it.len = len;
	it.what = what;
	it.damage = damage;
	if (damage) {
		c->sum.damaged++;
		c->sum.damaged_bytes += len;
	} else {
		c->sum.notes++;
	}
	if (c->fn)
		c->fn(c->arg, &it);
}

static void report(struct ck *c, const char *file, uint64_t off, uint64_t len, const char *what)
{
	emit(c, file, off, len, what, true);
}

static void note(struct ck *c, const char *file, const char *what)
{
	emit(c, file, 0, 0, what, false);
}

/* records of the segment, by offset, to check the hint against */
struct recs {
	struct {
		uint64_t off, size, version;
	} * v;
	size_t n, cap;
};

static int rec_seen(void *arg, const struct seg_scan_rec *r)
{
	struct recs *rs = arg;

	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 1024;
		void *nv = realloc(rs->v, cap * sizeof(*rs->v));
		if (nv == NULL)
			return -ENOMEM;
		rs->v = nv;
		rs->cap = cap;
	}
	rs->v[rs->n].off = r->off;
	rs->v[rs->n].size = r->size;
	rs->v[rs->n].version = r->h.version;
	rs->n++;
	return 0;
}

struct damage_ctx {
	struct ck *c;
	struct recs *rs;
};

static int rec_damaged(void *arg, uint64_t off, uint64_t len, const struct seg_scan_rec *r)
{
	struct damage_ctx *d = arg;

	report(d->c, d->c->file, off, len,
	       r ? "record fails its checksum (reads of its key report data loss)"
	         : "damaged bytes, no record can be read there");
	return r ? rec_seen(d->rs, r) : 0;
}

static int scan_rec_cb(void *arg, const struct seg_scan_rec *r)
{
	struct damage_ctx *d = arg;

	if (rec_codec(&r->h) != KV_CODEC_NONE) {
		/* its CRC matched; its value must also decompress */
		uint8_t *buf;
		size_t len;
		int rv = codec_decompress(rec_codec(&r->h), r->value, r->h.value_len,
		                          KV_VALUE_SIZE_MAX, &buf, &len);
		if (rv == 0)
			free(buf);
		else if (rv == KV_ECORRUPT)
			report(d->c, d->c->file, r->off, r->size,
			       "compressed value does not decompress (reads of its key report data "
			       "loss)");
		else
			return rv;
	}
	return rec_seen(d->rs, r);
}

struct hint_ck {
	struct ck *c;
	const struct recs *rs;
	const char *name;
	uint64_t bad;
	uint64_t end;  /* end of the last record it names */
	uint64_t size; /* the segment's size: entries past it are not "bad" */
};

static int hint_entry(void *arg, const struct hint_ent *e)
{
	struct hint_ck *h = arg;
	size_t lo = 0, hi = h->rs->n;

	if ((uint64_t)e->off + e->size > h->end)
		h->end = (uint64_t)e->off + e->size;
	if ((uint64_t)e->off + e->size > h->size)
		return 0; /* cut off the segment: reported on the segment */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (h->rs->v[mid].off < e->off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == h->rs->n || h->rs->v[lo].off != e->off || h->rs->v[lo].size != e->size ||
	    h->rs->v[lo].version != e->version)
		h->bad++;
	return 0;
}

/* What the directory says of a segment before it is read. */
struct seg_facts {
	uint64_t listed; /* size META lists; 0: not listed */
	bool sealed;     /* listed, or has a hint */
	bool torn_ok;    /* a torn end is possible: the newest unsealed segment */
};

static int check_segment(struct ck *c, struct kv_stor_tenant *tn, uint32_t id,
                         const struct seg_facts *f)
{
	char name[SEG_NAME_MAX], hname[SEG_NAME_MAX], msg[160];
	struct recs rs = {0};
	struct damage_ctx dc = {c, &rs};
	struct seg_scan_result res;
	struct seg *s;
	bool damaged_header = false, open_extent;
	uint64_t expect = f->listed, size;
	int rv;

	seg_name(name, id, ".seg");
	seg_name(hname, id, ".hint");
	c->file = name;
	rv = seg_open(tn, id, &s);
	if (rv == KV_ECORRUPT || rv == KV_EFORMAT) {
		if ((rv = seg_open_raw(tn, id, &s)) != 0)
			goto unreadable;
		damaged_header = true;
		if (s->size < SEG_HEADER_SIZE) {
			if (f->sealed)
				report(c, name, 0, s->size,
				       "sealed segment cut to less than its header (META or its "
				       "hint "
				       "says it held records: their keys read DATA_LOSS)");
			else
				report(c, name, 0, s->size,
				       "shorter than a segment header (left by a crash while it "
				       "was "
				       "created; removed at next open)");
			seg_unref(s);
			return 0;
		}
		report(c, name, 0, SEG_HEADER_SIZE, "segment header damaged");
	} else if (rv != 0) {
		goto unreadable;
	}
	c->sum.segments++;
	size = s->size;
	/* a backend that reports a segment left open as long as the room it
	 * has (storage.h append_reopened) */
	open_extent = !tn->st->append_reopened && !s->h->sealed && !damaged_header;
	rv = seg_scan(s->h, s->size, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX,
	              f->torn_ok && !damaged_header && !(s->flags & SEG_F_MERGED) ? SEG_SCAN_ACTIVE
	                                                                          : 0,
	              scan_rec_cb, rec_damaged, &dc, &res);
	if (rv != 0)
		goto out;
	c->sum.records += res.records;
	/* its hint file, if any: a cache, so its faults are notes; what it
	 * names past the end of the segment is damage of the segment */
	{
		struct hint_ck hc = {c, &rs, hname, 0, 0, s->size};
		rv = hint_load(tn, id, f->sealed ? 1ull << 32 : s->size, KV_KEY_SIZE_MAX,
		               hint_entry, &hc);
		if (rv == 0) {
			c->sum.hints++;
			if (hc.bad > 0)
				note(c, hname,
				     "hint entries that do not match the segment (rebuilt "
				     "from the segment at next open)");
			if (hc.end > expect)
				expect = hc.end;
		} else if (rv == -ENOMEM) {
			goto out;
		} else if (rv != -ENOENT) {
			note(c, hname, "hint file cannot be used (the segment is scanned instead)");
		}
		rv = 0;
	}
	if (open_extent && res.unsynced_cut == 0 && res.valid_end < s->size) {
		/* the extent's room, not the segment's length: nothing was
		 * written past its last record (bytes an earlier use left fail
		 * the seeded crc) */
		snprintf(msg, sizeof(msg),
		         "open (not sealed): %llu bytes of records, the rest of its extent "
		         "unwritten (sealed at the end of its records at next open)",
		         (unsigned long long)(res.valid_end - SEG_HEADER_SIZE));
		emit(c, name, res.valid_end, s->size - res.valid_end, msg, false);
		size = res.valid_end;
	}
	if (res.valid_end < size) {
		if (f->torn_ok && !damaged_header && !(s->flags & SEG_F_MERGED))
			report(c, name, res.valid_end, size - res.valid_end,
			       "torn end of the active segment (a write cut by a crash; cut off "
			       "at next open)");
		else
			report(c, name, res.valid_end, size - res.valid_end,
			       "damaged bytes at the end");
	}
	if (expect > size) {
		snprintf(msg, sizeof(msg),
		         "sealed segment cut short: %llu bytes gone (keys of the records there "
		         "read DATA_LOSS where its hint names them)",
		         (unsigned long long)(expect - size));
		report(c, name, size, expect - size, msg);
	}
out:
	free(rs.v);
	seg_unref(s);
	return rv;
unreadable:
	if (rv == -ENOMEM || rv == -EMFILE || rv == -ENFILE)
		return rv;
	snprintf(msg, sizeof(msg), "segment cannot be read: %s", strerror(-rv));
	report(c, name, 0, 0, msg);
	return 0;
}

static bool in_ids(const uint32_t *v, size_t n, uint32_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

struct idlist {
	uint32_t *v;
	size_t n, cap;
};

static int idlist_push(struct idlist *l, uint32_t id)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		uint32_t *nv = realloc(l->v, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = id;
	return 0;
}

struct ck_listing {
	struct ck *c;
	struct kv_stor_tenant *tn;
	struct idlist *segs, *hints, *retired;
};

static int ck_list_entry(void *arg, const struct kv_stor_entry *e)
{
	struct ck_listing *x = arg;
	struct merge_commit mc;
	size_t len, i;
	int rv = 0, r;

	if (e->kind == KV_STOR_SEGMENT)
		return idlist_push(x->segs, e->id);
	if (e->kind == KV_STOR_HINT)
		return idlist_push(x->hints, e->id);
	if (e->kind != KV_STOR_META)
		return 0;
	len = strlen(e->name);
	if (strncmp(e->name, "merge-", 6) != 0 || len <= 13 ||
	    strcmp(e->name + len - 7, ".commit") != 0)
		return 0;
	r = commit_load(x->tn, e->name, &mc);
	if (r == 0) {
		for (i = 0; i < mc.nretired && rv == 0; i++)
			rv = idlist_push(x->retired, mc.retired[i]);
		commit_release(&mc);
	} else if (r == KV_ECORRUPT || r == KV_EFORMAT) {
		report(x->c, e->name, 0, 0, "merge commit damaged (its retired segments are kept)");
	}
	return rv;
}

int kv_check(const char *path, kv_check_fn fn, void *arg, struct kv_check_summary *ret)
{
	struct kv_storage *st;
	int rv;

	if ((rv = kv_storage_file_open(NULL, NULL, &st)) != 0)
		return rv;
	rv = db_check(st, path, fn, arg, ret);
	kv_storage_close(st);
	return rv;
}

int db_check(struct kv_storage *st, const char *path, kv_check_fn fn, void *arg,
             struct kv_check_summary *ret)
{
	struct ck c = {.fn = fn, .arg = arg};
	struct idlist segs = {0}, hints = {0}, retired = {0}, all = {0};
	struct manifest man = {0};
	uint32_t newest_open = 0;
	size_t i;
	struct kv_stor_tenant *tn;
	int rv = 0, mr;

	if ((rv = st->ops->tenant_open(st, path, 0, &tn)) != 0)
		return rv;
	if ((rv = st->ops->tenant_lock(tn, false)) != 0)
		goto out;
	{
		struct ck_listing x = {&c, tn, &segs, &hints, &retired};
		if ((rv = stor_list(tn, ck_list_entry, &x)) != 0)
			goto out;
	}
	mr = manifest_read(tn, &man);
	if (mr == KV_ECORRUPT || mr == KV_EFORMAT)
		report(&c, "META", 0, 0,
		       "META damaged (the compact revision and the list of sealed segments are "
		       "lost)");
	else if (mr == -ENOMEM)
		rv = mr;
	if (mr != 0)
		memset(&man, 0, sizeof(man));
	for (i = 0; i < segs.n && rv == 0; i++)
		rv = idlist_push(&all, segs.v[i]);
	for (i = 0; i < hints.n && rv == 0; i++)
		rv = idlist_push(&all, hints.v[i]);
	for (i = 0; i < man.nsegs && rv == 0; i++)
		rv = idlist_push(&all, man.segs[i].id);
	if (rv != 0)
		goto out;
	if (all.n > 1)
		qsort(all.v, all.n, sizeof(*all.v), cmp_u32);
	/* the newest segment that is not sealed: the only place for a torn end */
	for (i = 0; i < segs.n; i++)
		if (segs.v[i] > newest_open && manifest_find(&man, segs.v[i]) == NULL &&
		    !in_ids(hints.v, hints.n, segs.v[i]) &&
		    !in_ids(retired.v, retired.n, segs.v[i]))
			newest_open = segs.v[i];
	for (i = 0; i < all.n && rv == 0; i++) {
		uint32_t id = all.v[i];
		const struct manifest_seg *listed = manifest_find(&man, id);
		bool present = in_ids(segs.v, segs.n, id), hinted = in_ids(hints.v, hints.n, id);
		char name[SEG_NAME_MAX];

		if (i > 0 && all.v[i - 1] == id)
			continue;
		if (in_ids(retired.v, retired.n, id)) {
			seg_name(name, id, present ? ".seg" : ".hint");
			note(&c, name, "retired by a merge (removed at next open)");
			continue;
		}
		if (!present) {
			if (listed != NULL) {
				seg_name(name, id, ".seg");
				report(&c, name, 0, listed->size,
				       hinted ? "sealed segment missing (META lists it; its hint "
				                "remains: the keys it names read DATA_LOSS)"
				              : "sealed segment missing (META lists it; no hint "
				                "remains to say which keys it held)");
			} else if (man.format >= 2) {
				seg_name(name, id, ".hint");
				note(&c, name,
				     "hint of a segment a merge retired (removed at next open)");
			} else {
				seg_name(name, id, ".seg");
				report(&c, name, 0, 0,
				       "segment missing (its hint remains: the keys it names read "
				       "DATA_LOSS)");
			}
			continue;
		}
		{
			struct seg_facts f = {listed ? listed->size : 0, listed != NULL || hinted,
			                      id == newest_open};
			rv = check_segment(&c, tn, id, &f);
		}
	}
	if (rv == 0 && man.format >= 2 && man.active != 0 && !in_ids(segs.v, segs.n, man.active) &&
	    !in_ids(retired.v, retired.n, man.active) && manifest_find(&man, man.active) == NULL) {
		char name[SEG_NAME_MAX];
		seg_name(name, man.active, ".seg");
		report(&c, name, 0, 0,
		       "active segment missing (what was written since the last seal is lost)");
	}
out:
	free(segs.v);
	free(hints.v);
	free(retired.v);
	free(all.v);
	manifest_release(&man);
	st->ops->tenant_close(tn);
	if (rv == 0 && ret)
		*ret = c.sum;
	return rv;
}
