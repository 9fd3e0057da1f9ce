/*
 * merge.c — rewrite the sealed segments, keeping what is live and within
 * retention; compaction.
 *
 * Why it is safe while reads and writes go on:
 *
 *   The merge set is every segment sealed when the merge starts (the active
 *   segment is sealed first, by a barrier). Every record outside the set is
 *   newer than every record in it, so along a key's chain the records outside
 *   the set come first and merge only ever rewrites a chain's older part.
 *
 *   Merge walks the key directory in key order. For each key it walks the
 *   chain, decides which records of the set to keep (retention, compact
 *   revision, open iterators' snapshots, TTL, deletes), and appends the kept
 *   ones oldest first to an output segment, each pointing at the previous
 *   kept one. Outputs are written under a temporary name, synced, renamed,
 *   and only then do key-directory changes that point into them happen —
 *   as barriers on the write path, so no batch is being formed meanwhile.
 *   A change is a compare-and-set: if the key still points at the record
 *   merge saw, it now points at the copy; if a write got there first, the
 *   new record's previous-location points at the old copy, and merge records
 *   the relocation old → new instead.
 *
 *   A blob descriptor kept is copied after its chunks, naming their new
 *   locations; the chunks of uploads open when the merge started are copied
 *   too, each with a relocation old → new (blob.h invariant 2).
 *
 *   Last, a barrier writes the commit file (retired segments, relocations),
 *   takes the retired segments out of the table and installs the relocation
 *   map; the files are unlinked after. A crash before the commit leaves old
 *   and new copies side by side (same versions: recovery keeps one); after
 *   it, recovery finishes the deletion.
 *
 * Invariants:
 *   1. Merge never drops the newest record of a key unless the key is dead
 *      (deleted or expired), nothing of it is kept, and the whole chain is in
 *      the merge set — so no older record can surface again.
 *   2. A record is copied only after its crc matched; a newest record that
 *      fails its crc is copied byte for byte, so reads of it still report
 *      data loss instead of silently falling back to an older value.
 *   3. One merge at a time (merge_mu).
 *
 * An evicted key (write.c, evict=oldest) gets a tombstone with no previous
 * link and REC_F_HISTORY_CUT: its chain is that tombstone alone, so merge
 * copies none of the records it replaced (nothing reaches them) and they go
 * with their segments. Invariant 1 still holds when the tombstone itself is
 * dropped: when its segment is in the set, so is every segment holding an
 * older record (all but the new, empty active segment are sealed at the
 * start, merge outputs included), and the same commit retires them.
 * The write order of an evict=oldest database (evict.h) follows the swaps:
 * a head that moves takes its entry along, one dropped loses it (apply_fn).
 */
#include "db.h"

#include "endian_util.h"
#include "hint.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MERGE_PAGE 256
#define OUT_BUF (1u << 20)
#define APPLY_CHUNK 4096

struct chain_rec {
	uint64_t ptr; /* location as pointed at (key directory or newer record) */
	uint64_t loc; /* where it was found */
	struct rec_header h;
	uint8_t *buf; /* the whole record, crc checked */
	const uint8_t *value;
	bool in_set;
	bool keep;
	bool corrupt;
	uint64_t new_loc;
};

struct apply {
	size_t key_off;
	uint32_t key_len;
	uint64_t old_loc;
	uint64_t new_loc; /* 0: nothing of the set kept */
	bool is_head;
	struct kd_entry ne;
};

struct merge_ctx {
	kv_db *db;
	uint32_t *set;
	size_t nset;
	uint64_t set_bytes;
	uint64_t now, floor, start_version;
	uint64_t *snaps;
	size_t nsnaps;

	/* the output being written */
	struct seg *out;
	uint64_t out_len;
	uint8_t *buf;
	size_t blen;
	struct hint_writer hw;
	struct apply *ap;
	size_t nap, capap;
	uint8_t *akeys;
	size_t aklen, akcap;

	uint32_t *outputs;
	size_t nout, capout;
	struct reloc relocs;
	uint64_t retained;
	uint64_t corrupt;

	struct chain_rec *ch;
	size_t nch, capch;
	uint64_t min_snap; /* oldest version an open iterator reads at; UINT64_MAX: none */

	/* uploads open when the merge started (blob.h invariant 2) */
	struct blob_open *ups;
	size_t nups;
	uint64_t blob_stored; /* the chunk bytes of the descriptor copy_record copied last */
};

static bool in_set(const struct merge_ctx *m, uint32_t id)
{
	size_t lo = 0, hi = m->nset;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->set[mid] == id)
			return true;
		if (m->set[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* ---- barriers ---------------------------------------------------------- */

static int merge_start_fn(kv_db *db, void *arg)
{
	struct merge_ctx *m = arg;
	size_t i;
	int rv;

	/* A lost segment's records are on chains merge would walk, and
	 * retiring it would erase the evidence of the loss: no merge. */
	pthread_mutex_lock(&db->seg_mu);
	for (i = 0; i < db->nsegs; i++) {
		if (db->segs[i]->lost) {
			pthread_mutex_unlock(&db->seg_mu);
			return KV_ECORRUPT;
		}
	}
	pthread_mutex_unlock(&db->seg_mu);
	/* a full device still merges what is sealed (the active segment
	 * waits for the next merge) */
	if (db->active != NULL && db->tail > SEG_HEADER_SIZE && (rv = write_roll(db)) != 0 &&
	    rv != -ENOSPC)
		return rv;
	/* META says a merge runs, before any output exists: recovery then
	 * removes the outputs of one that never committed */
	pthread_mutex_lock(&db->seg_mu);
	db->merge_from = db->active != NULL ? db->active->id : db->next_seg_id;
	pthread_mutex_unlock(&db->seg_mu);
	if ((rv = manifest_write(db)) != 0) {
		db->merge_from = 0;
		return rv;
	}
	m->start_version = atomic_load(&db->committed_version);
	/* no batch is in flight: every chunk written so far is recorded */
	if ((rv = blob_open_snapshot(db, &m->ups, &m->nups)) != 0)
		return rv;
	pthread_mutex_lock(&db->seg_mu);
	m->set = malloc((db->nsegs + 1) * sizeof(*m->set));
	if (m->set == NULL) {
		pthread_mutex_unlock(&db->seg_mu);
		return -ENOMEM;
	}
	for (i = 0; i < db->nsegs; i++) {
		struct seg *s = db->segs[i];
		if (s->sealed && !s->retired) {
			m->set[m->nset++] = s->id;
			m->set_bytes += s->size;
		}
	}
	pthread_mutex_unlock(&db->seg_mu);
	return 0;
}

struct apply_batch {
	struct merge_ctx *m;
	size_t from, to;
	int err;
};

static int apply_fn(kv_db *db, void *arg)
{
	struct apply_batch *ab = arg;
	struct merge_ctx *m = ab->m;
	size_t i;
	int rv = 0;

	pthread_rwlock_wrlock(&db->kd_lock);
	for (i = ab->from; i < ab->to; i++) {
		struct apply *a = &m->ap[i];
		const uint8_t *key = m->akeys + a->key_off;
		struct kd_entry cur, old;
		bool replaced;

		if (keydir_get(db->kd, key, a->key_len, &cur) == 0 &&
		    loc_make(cur.seg, cur.off) == a->old_loc) {
			if (a->new_loc == 0) {
				if ((rv = keydir_remove(db->kd, key, a->key_len, &old)) != 0)
					break;
				db_account_remove(db, &old);
				blob_account_replaced(db, a->old_loc);
				if (db->opt.evict == KV_EVICT_OLDEST && !(old.flags & KD_F_TOMBSTONE))
					evict_order_forget(&db->order, old.version);
			} else if (a->is_head) {
				if ((rv = keydir_put(db->kd, key, a->key_len, &a->ne, &old, &replaced)) != 0)
					break;
				db_account(db, &a->ne, &old, replaced);
				blob_account_moved(db, a->old_loc, a->new_loc);
				if (db->opt.evict == KV_EVICT_OLDEST && !(a->ne.flags & KD_F_TOMBSTONE))
					evict_order_move(&db->order, a->ne.version, a->new_loc);
			}
		} else if (a->new_loc != 0) {
			/* a newer record points at old_loc */
			if ((rv = reloc_put(&m->relocs, a->old_loc, a->new_loc)) != 0)
				break;
		}
	}
	atomic_store(&db->evict_bytes, evict_order_memory(&db->order));
	pthread_rwlock_unlock(&db->kd_lock);
	return rv;
}

struct commit_arg {
	struct merge_ctx *m;
	uint64_t seq;
};

static int commit_fn(kv_db *db, void *arg)
{
	struct commit_arg *ca = arg;
	struct merge_ctx *m = ca->m;
	struct merge_commit mc = {0};
	uint64_t freed = 0;
	size_t i;
	int rv;

	mc.seq = ca->seq = db->merge_seq + 1;
	mc.retired = m->set;
	mc.nretired = m->nset;
	if ((rv = reloc_entries(&m->relocs, &mc.relocs, &mc.nrelocs)) != 0)
		return rv;
	rv = commit_write(db->tn, &mc);
	free(mc.relocs);
	if (rv != 0)
		return rv;
	db->merge_seq = mc.seq;
	pthread_mutex_lock(&db->seg_mu);
	for (i = 0; i < m->nset; i++) {
		struct seg *s = segtab_find_locked(db, m->set[i]);
		if (s == NULL)
			continue;
		s->retired = true;
		freed += s->size;
		segtab_remove_locked(db, m->set[i]);
	}
	reloc_release(&db->reloc);
	db->reloc = m->relocs;
	reloc_init(&m->relocs);
	atomic_fetch_add(&db->seg_epoch, 1);
	pthread_mutex_unlock(&db->seg_mu);
	pthread_rwlock_wrlock(&db->kd_lock);
	db->disk_bytes -= freed < db->disk_bytes ? freed : db->disk_bytes;
	pthread_rwlock_unlock(&db->kd_lock);
	/* the commit is durable; META stops listing what it retired and says no
	 * merge runs (a crash before this is told apart by the commit) */
	db->merge_from = 0;
	return manifest_write(db);
}

/* ---- output segments --------------------------------------------------- */

static int out_flush(struct merge_ctx *m)
{
	int rv;

	if (m->blen == 0)
		return 0;
	rv = stor_seg_write(m->out->h, m->buf, m->blen, m->out_len - m->blen);
	m->blen = 0;
	return rv;
}

static int apply_pending(struct merge_ctx *m)
{
	size_t i;
	int rv;

	for (i = 0; i < m->nap; i += APPLY_CHUNK) {
		struct apply_batch ab = {m, i, i + APPLY_CHUNK < m->nap ? i + APPLY_CHUNK : m->nap, 0};
		if ((rv = write_barrier(m->db, apply_fn, &ab)) != 0)
			return rv;
	}
	m->nap = 0;
	m->aklen = 0;
	return 0;
}

/* Makes the current output durable under its final name, publishes it and
 * applies the key-directory changes that point into it. */
static int out_finish(struct merge_ctx *m)
{
	kv_db *db = m->db;
	struct seg *s = m->out;
	int rv;

	if (s == NULL)
		return 0;
	if ((rv = out_flush(m)) != 0)
		return rv;
	if ((rv = stor_seg_sync(s->h)) != 0)
		return rv;
	if ((rv = stor_seg_publish(s->h)) != 0)
		return rv;
	/* a hint is an aid: on a full device the output goes without one
	 * (it is scanned at the next activation, and hinted when there is
	 * room) rather than the merge that frees the device failing */
	rv = hint_writer_finish(&m->hw, db->tn, s->id);
	if (rv != 0 && rv != -ENOSPC)
		return rv;
	s->has_hint = rv == 0;
	if ((rv = db_fsync_dir(db)) != 0)
		return rv;
	s->size = m->out_len;
	s->sealed = true;
	db_seg_map(db, s, false);
	pthread_mutex_lock(&db->seg_mu);
	rv = segtab_insert_locked(db, s);
	pthread_mutex_unlock(&db->seg_mu);
	if (rv != 0)
		return rv;
	seg_unpin(s); /* published and sealed: the file budget may close it */
	m->out = NULL;
	pthread_rwlock_wrlock(&db->kd_lock);
	db->disk_bytes += m->out_len;
	pthread_rwlock_unlock(&db->kd_lock);
	return apply_pending(m);
}

static int out_start(struct merge_ctx *m)
{
	kv_db *db = m->db;
	uint32_t id;
	int rv;

	pthread_mutex_lock(&db->seg_mu);
	id = db->next_seg_id++;
	pthread_mutex_unlock(&db->seg_mu);
	rv = seg_create(db->tn, id, SEG_F_MERGED, m->start_version, m->now, KV_STOR_SEG_TEMP,
	                &m->out);
	if (rv != 0)
		return rv;
	if (m->nout == m->capout) {
		size_t cap = m->capout ? m->capout * 2 : 8;
		uint32_t *nv = realloc(m->outputs, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		m->outputs = nv;
		m->capout = cap;
	}
	m->outputs[m->nout++] = id;
	m->out_len = SEG_HEADER_SIZE;
	m->blen = 0;
	return 0;
}

/* Appends one record (already encoded, its crc made with seed: record.h
 * invariant 1) to the output, restamping its crc for the output's seed
 * (a damaged record stays damaged); *ret_loc gets where. */
static int out_append(struct merge_ctx *m, uint8_t *rec, size_t size, uint32_t seed,
                      const struct hint_ent *he, uint64_t *ret_loc)
{
	struct hint_ent e = *he;
	int rv;

	if (m->out != NULL && m->out_len > SEG_HEADER_SIZE &&
	    m->out_len + size > m->db->opt.segment_size && (rv = out_finish(m)) != 0)
		return rv;
	if (m->out == NULL && (rv = out_start(m)) != 0)
		return rv;
	if (seed != m->out->crc_seed)
		put_le32(rec, get_le32(rec) ^ seed ^ m->out->crc_seed);
	if (m->blen + size > OUT_BUF && (rv = out_flush(m)) != 0)
		return rv;
	if (size > OUT_BUF) {
		rv = stor_seg_write(m->out->h, rec, size, m->out_len);
		if (rv != 0)
			return rv;
	} else {
		memcpy(m->buf + m->blen, rec, size);
		m->blen += size;
	}
	e.off = (uint32_t)m->out_len;
	e.size = (uint32_t)size;
	if ((rv = hint_writer_add(&m->hw, &e)) != 0)
		return rv;
	*ret_loc = loc_make(m->out->id, (uint32_t)m->out_len);
	m->out_len += size;
	return 0;
}

static int add_apply(struct merge_ctx *m, const uint8_t *key, size_t len, const struct apply *a)
{
	if (m->nap == m->capap) {
		size_t cap = m->capap ? m->capap * 2 : 1024;
		struct apply *nv = realloc(m->ap, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		m->ap = nv;
		m->capap = cap;
	}
	if (m->aklen + len > m->akcap) {
		size_t cap = m->akcap ? m->akcap : 64 * 1024;
		uint8_t *nk;
		while (cap < m->aklen + len)
			cap *= 2;
		if ((nk = realloc(m->akeys, cap)) == NULL)
			return -ENOMEM;
		m->akeys = nk;
		m->akcap = cap;
	}
	m->ap[m->nap] = *a;
	m->ap[m->nap].key_off = m->aklen;
	m->ap[m->nap].key_len = (uint32_t)len;
	memcpy(m->akeys + m->aklen, key, len);
	m->aklen += len;
	m->nap++;
	return 0;
}

/* ---- deciding what to keep --------------------------------------------- */

static int chain_push(struct merge_ctx *m, const struct chain_rec *c)
{
	if (m->nch == m->capch) {
		size_t cap = m->capch ? m->capch * 2 : 16;
		struct chain_rec *nv = realloc(m->ch, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		m->ch = nv;
		m->capch = cap;
	}
	m->ch[m->nch++] = *c;
	return 0;
}

static void chain_reset(struct merge_ctx *m)
{
	for (size_t i = 0; i < m->nch; i++)
		free(m->ch[i].buf);
	m->nch = 0;
}

/* True when nothing older than the record just loaded can be kept, so the
 * walk may stop: retention has its versions, they reach back past
 * history_ms, and every open iterator has the version it needs. */
static bool chain_enough(const struct merge_ctx *m, const struct chain_rec *c)
{
	const struct kv_options *o = &m->db->opt;

	if (m->nch < o->history_versions)
		return false;
	if (o->history_ms && c->h.timestamp_ms + o->history_ms > m->now)
		return false;
	return c->h.version <= m->min_snap;
}

/* Loads the chain of key from its head, each record whole (crc checked), as
 * far as retention can reach. A dangling or damaged link ends it;
 * *ret_ended_early says older records exist that were not loaded. */
static int load_chain(struct merge_ctx *m, const uint8_t *key, size_t len,
                      const struct kd_entry *head, bool *ret_ended_early)
{
	uint64_t ptr = loc_make(head->seg, head->off), last = UINT64_MAX;
	int rv;

	chain_reset(m);
	*ret_ended_early = false;
	while (ptr != 0) {
		struct chain_rec c;
		struct rec_read r;

		memset(&c, 0, sizeof(c));
		rv = read_at(m->db, ptr, key, len, true, &r);
		if (rv == KV_ECORRUPT && m->nch == 0) {
			/* the newest record is damaged: keep it as it is */
			struct seg *s;
			uint64_t loc;
			if ((rv = db_seg_acquire(m->db, ptr, &s, &loc)) != 0)
				return rv == -ENOENT ? 0 : rv;
			db_seg_release(s);
			c.ptr = ptr;
			c.loc = loc;
			c.in_set = in_set(m, loc_seg(loc));
			c.corrupt = true;
			c.h.version = head->version;
			c.h.type = (head->flags & KD_F_TOMBSTONE) ? REC_DELETE : REC_PUT;
			c.h.expiry_ms = head->expiry_ms;
			c.h.key_len = (uint32_t)len;
			m->corrupt++;
			*ret_ended_early = true;
			return chain_push(m, &c);
		}
		if (rv == -ENOENT || rv == KV_ECORRUPT || (rv == 0 && r.h.version >= last)) {
			if (rv == KV_ECORRUPT || rv == 0)
				m->corrupt++;
			if (rv == 0)
				rec_read_release(&r);
			*ret_ended_early = true;
			return 0;
		}
		if (rv != 0)
			return rv;
		last = r.h.version;
		c.ptr = ptr;
		c.loc = r.loc;
		c.h = r.h;
		c.buf = r.buf;
		c.value = r.value;
		c.in_set = in_set(m, loc_seg(r.loc));
		if ((rv = chain_push(m, &c)) != 0) {
			free(c.buf);
			return rv;
		}
		if (r.h.prev_seg == 0)
			break;
		if (chain_enough(m, &c)) {
			*ret_ended_early = true;
			break;
		}
		ptr = loc_make(r.h.prev_seg, r.h.prev_off);
	}
	return 0;
}

static void decide(struct merge_ctx *m)
{
	kv_db *db = m->db;
	uint32_t keep_n = db->opt.history_versions;
	uint64_t keep_ms = db->opt.history_ms;
	bool any_older_kept = false;
	size_t i, j;

	for (i = 0; i < m->nch; i++) {
		struct chain_rec *c = &m->ch[i];
		bool keep = i < keep_n;

		if (!keep && keep_ms && c->h.timestamp_ms + keep_ms > m->now)
			keep = true;
		for (j = 0; j < m->nsnaps && !keep; j++)
			if (c->h.version <= m->snaps[j] && (i == 0 || m->ch[i - 1].h.version > m->snaps[j]))
				keep = true;
		if (keep && m->floor && c->h.version < m->floor && i > 0) {
			/* superseded at or before the compact revision */
			for (j = 0; j < i; j++)
				if (m->ch[j].h.version <= m->floor)
					keep = false;
		}
		if (i > 0 && db_expired(db, c->h.expiry_ms, m->now))
			keep = false;
		if (i > 0 && m->ch[i - 1].corrupt)
			keep = false; /* cannot trust a damaged record's link */
		c->keep = keep;
		if (i > 0 && keep)
			any_older_kept = true;
	}
	if (m->nch > 0 && !m->ch[0].corrupt) {
		struct chain_rec *h = &m->ch[0];
		bool dead = h->h.type == REC_DELETE || db_expired(db, h->h.expiry_ms, m->now);
		if (dead && !any_older_kept) {
			bool hold = h->h.type == REC_DELETE && keep_n > 1 &&
			            !(m->floor && h->h.version <= m->floor);
			if (keep_ms && h->h.timestamp_ms + keep_ms > m->now)
				hold = true;
			h->keep = hold;
		}
	}
	if (m->nch > 0 && m->ch[0].corrupt)
		m->ch[0].keep = true;
}

/* ---- one key ----------------------------------------------------------- */

/* Copies the chunk at loc (of key) to the output when it lies in the
 * set; *ret_loc gets where it is now (its location unchanged when it is
 * outside the set), or 0 when it cannot be read (its reads then report
 * the damage). */
static int copy_chunk(struct merge_ctx *m, const uint8_t *key, size_t len, uint64_t loc,
                      uint64_t *ret_loc)
{
	struct rec_read r;
	struct hint_ent he;
	int rv;

	rv = read_at(m->db, loc, key, len, true, &r);
	if (rv == KV_ECORRUPT || rv == -ENOENT || (rv == 0 && r.h.type != REC_CHUNK)) {
		if (rv == 0)
			rec_read_release(&r);
		m->corrupt++;
		*ret_loc = 0;
		return 0;
	}
	if (rv != 0)
		return rv;
	if (!in_set(m, loc_seg(r.loc))) {
		*ret_loc = r.loc;
		rec_read_release(&r);
		return 0;
	}
	r.h.flags &= (uint8_t)~REC_F_BATCH_MORE;
	rec_encode(r.buf, &r.h, key, r.value, 0);
	he = (struct hint_ent){
		.type = REC_CHUNK,
		.flags = r.h.flags,
		.key_len = r.h.key_len,
		.key = key,
	};
	rv = out_append(m, r.buf, (size_t)rec_size(r.h.key_len, r.h.value_len), 0, &he, ret_loc);
	rec_read_release(&r);
	return rv;
}

/* A descriptor being copied: its chunks go first, and the copy names
 * where they are now (blob.h invariant 2). */
static int copy_chunks(struct merge_ctx *m, const uint8_t *key, size_t len, uint8_t *desc,
                       size_t desc_len)
{
	struct blob_desc d;
	uint32_t i;
	int rv;

	if (blob_desc_parse(desc, desc_len, &d) != 0) {
		m->corrupt++;
		return 0; /* copied as it is: its reads report the damage */
	}
	for (i = 0; i < d.nchunks; i++) {
		uint64_t loc = blob_desc_loc(&d, i), now;
		if (loc == 0)
			continue;
		if ((rv = copy_chunk(m, key, len, loc, &now)) != 0)
			return rv;
		blob_desc_set_loc(desc, i, now);
	}
	m->blob_stored = d.stored;
	return 0;
}

/* The chunks of uploads open when the merge started: copied, and their
 * old locations relocated, so the descriptor a commit writes later (with
 * the old ones) finds them. */
static int copy_open_chunks(struct merge_ctx *m)
{
	size_t i;
	uint32_t j;
	int rv;

	for (i = 0; i < m->nups; i++) {
		const struct blob_open *u = &m->ups[i];
		for (j = 0; j < u->n; j++) {
			uint64_t now;
			if ((rv = copy_chunk(m, u->key, u->key_len, u->locs[j], &now)) != 0)
				return rv;
			/* (also one a relocation of an earlier merge led to:
			 * that relocation goes with this merge's commit) */
			if (now != 0 && now != u->locs[j] &&
			    (rv = reloc_put(&m->relocs, u->locs[j], now)) != 0)
				return rv;
		}
	}
	return 0;
}

static int copy_record(struct merge_ctx *m, const uint8_t *key, size_t len, struct chain_rec *c,
                       bool is_head, uint64_t prev_new, bool cut)
{
	struct hint_ent he;
	struct rec_read r;
	int rv;

	m->blob_stored = 0;
	if (!c->corrupt && c->buf != NULL) {
		/* read and checked when the chain was loaded */
		memset(&r, 0, sizeof(r));
		r.h = c->h;
		r.buf = c->buf;
		r.value = c->value;
		c->buf = NULL;
		rv = 0;
	} else if (!c->corrupt) {
		rv = read_at(m->db, c->ptr, key, len, true, &r);
		if (rv == KV_ECORRUPT) {
			m->corrupt++;
			if (!is_head) {
				c->keep = false;
				return 0;
			}
			c->corrupt = true;
		} else if (rv == -ENOENT) {
			c->keep = false;
			return 0;
		} else if (rv != 0) {
			return rv;
		}
	}
	if (c->corrupt) {
		/* byte for byte, so a read still reports the damage */
		struct seg *s;
		uint64_t loc;
		uint8_t *raw;
		uint32_t size, seed;
		struct kd_entry e;
		pthread_rwlock_rdlock(&m->db->kd_lock);
		rv = keydir_get(m->db->kd, key, len, &e);
		pthread_rwlock_unlock(&m->db->kd_lock);
		if (rv != 0)
			return 0;
		size = e.size;
		if ((rv = db_seg_acquire(m->db, c->ptr, &s, &loc)) != 0)
			return rv == -ENOENT ? 0 : rv;
		if ((raw = malloc(size)) == NULL) {
			db_seg_release(s);
			return -ENOMEM;
		}
		rv = stor_seg_read(s->h, raw, size, loc_off(loc));
		seed = s->crc_seed;
		db_seg_release(s);
		if (rv != 0) {
			free(raw);
			return rv == -EIO ? 0 : rv;
		}
		he = (struct hint_ent){
			.type = (e.flags & KD_F_TOMBSTONE) ? REC_DELETE : REC_PUT,
			.key_len = (uint32_t)len,
			.version = e.version,
			.expiry_ms = e.expiry_ms,
			.key = key,
		};
		rv = out_append(m, raw, size, seed, &he, &c->new_loc);
		free(raw);
		return rv;
	}
	if (r.h.type == REC_BLOB && (rv = copy_chunks(m, key, len, (uint8_t *)r.value,
	                                              r.h.value_len)) != 0) {
		rec_read_release(&r);
		return rv;
	}
	r.h.flags &= (uint8_t) ~(REC_F_BATCH_MORE | REC_F_HISTORY_CUT);
	if (cut)
		r.h.flags |= REC_F_HISTORY_CUT;
	r.h.prev_seg = loc_seg(prev_new);
	r.h.prev_off = loc_off(prev_new);
	rec_encode(r.buf, &r.h, key, r.value, 0);
	he = (struct hint_ent){
		.type = r.h.type,
		.flags = r.h.flags,
		.key_len = r.h.key_len,
		.version = r.h.version,
		.expiry_ms = r.h.expiry_ms,
		.key = key,
	};
	rv = out_append(m, r.buf, (size_t)rec_size(r.h.key_len, r.h.value_len), 0, &he,
	                &c->new_loc);
	rec_read_release(&r);
	return rv;
}

static int merge_key(struct merge_ctx *m, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct apply a;
	size_t first, i;
	uint64_t prev_new = 0;
	bool ended_early, older_dropped;
	int rv;

	if ((rv = load_chain(m, key, len, e, &ended_early)) != 0)
		return rv;
	for (first = 0; first < m->nch && !m->ch[first].in_set; first++)
		;
	if (first == m->nch)
		return 0; /* nothing of this key is in the set */
	decide(m);

	/* oldest first, so each copy points at the copy before it */
	older_dropped = ended_early;
	if (m->nch > 0) {
		const struct chain_rec *oldest = &m->ch[m->nch - 1];
		if (oldest->h.prev_seg != 0 || (oldest->h.flags & REC_F_HISTORY_CUT))
			older_dropped = true;
	}
	for (i = m->nch; i-- > first;) {
		struct chain_rec *c = &m->ch[i];
		if (!c->keep) {
			older_dropped = true;
			continue;
		}
		rv = copy_record(m, key, len, c, i == 0, prev_new, prev_new == 0 && older_dropped);
		if (rv != 0)
			return rv;
		if (!c->keep) {
			older_dropped = true;
			continue;
		}
		prev_new = c->new_loc;
		if (i > 0)
			m->retained += rec_size(c->h.key_len, c->h.value_len) + m->blob_stored;
	}

	memset(&a, 0, sizeof(a));
	a.old_loc = m->ch[first].ptr;
	a.new_loc = prev_new; /* the newest kept copy */
	a.is_head = first == 0;
	if (a.is_head && m->ch[0].keep && a.new_loc != 0) {
		const struct chain_rec *h = &m->ch[0];
		a.ne.version = h->h.version;
		a.ne.seg = loc_seg(h->new_loc);
		a.ne.off = loc_off(h->new_loc);
		a.ne.size = e->size;
		a.ne.flags = e->flags;
		a.ne.expiry_ms = e->expiry_ms;
	} else if (a.is_head && !m->ch[0].keep) {
		a.new_loc = 0; /* the key goes */
	}
	return add_apply(m, key, len, &a);
}

/* ---- the walk ---------------------------------------------------------- */

struct page {
	uint8_t *keys;
	size_t klen, kcap;
	struct {
		size_t off;
		uint32_t len;
		struct kd_entry e;
	} ent[MERGE_PAGE];
	size_t n;
	int err;
};

static int page_visit(void *arg, const uint8_t *key, size_t len, const struct kd_entry *e)
{
	struct page *p = arg;

	if (p->klen + len > p->kcap) {
		size_t cap = p->kcap ? p->kcap : 16384;
		uint8_t *nk;
		while (cap < p->klen + len)
			cap *= 2;
		if ((nk = realloc(p->keys, cap)) == NULL) {
			p->err = -ENOMEM;
			return 1;
		}
		p->keys = nk;
		p->kcap = cap;
	}
	memcpy(p->keys + p->klen, key, len);
	p->ent[p->n].off = p->klen;
	p->ent[p->n].len = (uint32_t)len;
	p->ent[p->n].e = *e;
	p->klen += len;
	return ++p->n == MERGE_PAGE ? 1 : 0;
}

struct old_commits {
	kv_db *db;
	uint64_t keep_seq;
};

static int remove_old_commit(void *arg, const struct kv_stor_entry *e)
{
	struct old_commits *oc = arg;
	unsigned long long seq;
	char tail[16];

	if (e->kind == KV_STOR_META && sscanf(e->name, "merge-%16llx%15s", &seq, tail) == 2 &&
	    strcmp(tail, ".commit") == 0 && seq < oc->keep_seq)
		stor_meta_remove(oc->db->tn, e->name);
	return 0;
}

/* Removes the commits older than keep_seq (reloc.h, invariant 2). */
static void remove_old_commits(kv_db *db, uint64_t keep_seq)
{
	struct old_commits oc = {db, keep_seq};

	stor_list(db->tn, remove_old_commit, &oc);
}

static int merge_run(kv_db *db)
{
	struct merge_ctx m;
	struct page *pg = NULL;
	uint8_t *cursor = NULL;
	size_t cursor_len = 0, i;
	bool started = false;
	struct commit_arg ca = {&m, 0};
	int rv;

	memset(&m, 0, sizeof(m));
	m.db = db;
	m.now = db_now(db);
	m.floor = atomic_load(&db->compact_floor);
	hint_writer_init(&m.hw);
	reloc_init(&m.relocs);
	if ((m.buf = malloc(OUT_BUF)) == NULL || (pg = calloc(1, sizeof(*pg))) == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	if ((rv = write_barrier(db, merge_start_fn, &m)) != 0)
		goto out;
	if (m.nset == 0)
		goto out;

	for (;;) {
		pg->n = 0;
		pg->klen = 0;
		pthread_rwlock_rdlock(&db->kd_lock);
		rv = keydir_walk(db->kd, started ? cursor : NULL, cursor_len, !started, false,
		                 page_visit, pg);
		pthread_rwlock_unlock(&db->kd_lock);
		if (pg->err || rv < 0) {
			rv = pg->err ? pg->err : rv;
			goto out;
		}
		if (pg->n == 0)
			break;
		free(m.snaps);
		m.snaps = NULL;
		m.nsnaps = 0;
		/* without the list of open snapshots merge cannot tell which old
		 * versions an iterator still reads: stop rather than drop them */
		if ((rv = db_snapshots(db, &m.snaps, &m.nsnaps)) != 0)
			goto out;
		m.min_snap = UINT64_MAX;
		for (i = 0; i < m.nsnaps; i++)
			if (m.snaps[i] < m.min_snap)
				m.min_snap = m.snaps[i];
		for (i = 0; i < pg->n; i++) {
			rv = merge_key(&m, pg->keys + pg->ent[i].off, pg->ent[i].len, &pg->ent[i].e);
			if (rv != 0)
				goto out;
		}
		free(cursor);
		cursor_len = pg->ent[pg->n - 1].len;
		if ((cursor = malloc(cursor_len)) == NULL) {
			rv = -ENOMEM;
			goto out;
		}
		memcpy(cursor, pg->keys + pg->ent[pg->n - 1].off, cursor_len);
		started = true;
		if (pg->n < MERGE_PAGE)
			break;
	}
	if ((rv = copy_open_chunks(&m)) != 0)
		goto out;
	if ((rv = out_finish(&m)) != 0)
		goto out;
	if ((rv = apply_pending(&m)) != 0)
		goto out;
	if ((rv = write_barrier(db, commit_fn, &ca)) != 0)
		goto out;
	/* the commit is durable: the retired files can go */
	for (i = 0; i < m.nset; i++) {
		stor_seg_remove(db->tn, m.set[i], 0);
		stor_hint_remove(db->tn, m.set[i]);
	}
	remove_old_commits(db, ca.seq);
	rv = db_fsync_dir(db);
	atomic_store(&db->retained_bytes, m.retained);
	atomic_fetch_add(&db->merges, 1);
out:
	if (m.out != NULL) {
		/* an unfinished output: drop it, nothing points into it */
		stor_seg_remove(db->tn, m.out->id, KV_STOR_SEG_TEMP);
		seg_unref(m.out);
	}
	free(cursor);
	if (pg != NULL)
		free(pg->keys);
	free(pg);
	free(m.buf);
	free(m.set);
	free(m.snaps);
	free(m.ap);
	free(m.akeys);
	free(m.outputs);
	chain_reset(&m);
	free(m.ch);
	blob_open_release(m.ups, m.nups);
	hint_writer_release(&m.hw);
	reloc_release(&m.relocs);
	return rv;
}

int kv_merge(kv_db *db)
{
	int rv;

	pthread_mutex_lock(&db->merge_mu);
	atomic_store(&db->merging, true);
	rv = merge_run(db);
	atomic_store(&db->merging, false);
	pthread_mutex_unlock(&db->merge_mu);
	return rv;
}

/* Raises the compact revision, durably in META before reads see it. */
static int floor_fn(kv_db *db, void *arg)
{
	uint64_t revision = *(const uint64_t *)arg, old = atomic_load(&db->compact_floor);
	int rv;

	if (revision <= old)
		return 0;
	atomic_store(&db->compact_floor, revision);
	if ((rv = manifest_write(db)) != 0)
		atomic_store(&db->compact_floor, old);
	return rv;
}

int kv_compact(kv_db *db, uint64_t revision)
{
	int rv;

	if (revision > atomic_load(&db->committed_version))
		return -EINVAL;
	if ((rv = write_barrier(db, floor_fn, &revision)) != 0)
		return rv;
	return kv_merge(db);
}
