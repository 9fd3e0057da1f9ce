/*
 * check.c — what the crash loop verifies after each restart, and how the
 * maybe writes of the round are resolved.
 *
 * For every key, the chain of versions is read newest first with Versions
 * (values included, pages of CHECK_PAGE) down to the newest version the
 * previous check saw (the key's floor), or to its end on a full check
 * (every --full-every checks, and the last one). Then:
 *
 *   1. The chain is complete: not "truncated" (history is kept in full),
 *      versions strictly fall along it.
 *   2. Every acknowledged version of the key in the range read is listed,
 *      as a put or a tombstone as it was written, with exactly the value
 *      written (re-derived from key and nonce). A missing one is a lost
 *      write; one missing while a later acknowledged write (of any key) is
 *      present is also reported as a hole.
 *   3. Every listed version that was not acknowledged is one of this
 *      round's maybe writes of the key with exactly its content (a
 *      tombstone: one of its maybe deletes). Each maybe matches at most once,
 *      so a write applied twice is found too. A matched maybe counts as
 *      acknowledged from then on; an unmatched one was not applied and must
 *      never appear later. Short values (0 … 7 bytes) and tombstones can
 *      match more than one maybe of the key: such versions are assigned
 *      after all keys were read (resolve()), those with one candidate left
 *      first, then by what the other ops of a candidate's Batch were found
 *      at.
 *   4. Get(key) returns the newest listed version with its value, or
 *      NOT_FOUND when that is a tombstone: the newest acknowledged write is
 *      the head or was superseded by later (maybe or acknowledged) writes.
 *   5. Exact-version Gets: every acknowledged version not read back before
 *      (this round's), plus --sample random older ones, return their value
 *      (NOT_FOUND for a tombstone's version).
 *   6. A maybe Batch is all or nothing: its puts are all present or none,
 *      in op order.
 *   7. Stats: last_version is at least every acknowledged version and every
 *      listed one, never below the last check's; keys equals the number of
 *      keys whose newest version is a put. No version is listed for two keys.
 *
 * Versions below the floor were verified by earlier checks; the sampled
 * exact Gets and the full checks go back over them. A full check of every
 * version every round would cost O(writes so far) per round: the version
 * chain is on disk, so Versions and exact Gets walk it from the head.
 *
 * Runs on the main thread while no writer runs.
 */
#include "crash.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_PAGE       200u  /* versions with values per Versions call: ≤ 13 MiB */
#define CHECK_PAGE_BARE  1000u /* without values: the protocol's most */
#define CHECK_TIMEOUT_MS 120000u /* the first request replays the log */
#define NEAR_KILL_US     50000u
#define CHECK_THREADS_MAX 16u
#define CHECK_CAND_MAX    32u /* maybes of one key one listed version may be */

struct listed {
	uint64_t version;
	bool deleted;
};

struct lost {
	uint64_t version;
	uint32_t key;
};

/* A listed version that is no acknowledged write: one of the maybes of its
 * key with the same content (cand: indices into the key's pend). */
struct orphan {
	uint64_t version;
	uint32_t key;
	uint32_t ncand;
	uint32_t cand[CHECK_CAND_MAX];
	bool assigned;
};

/* What the check threads share. */
struct chk_run {
	struct cl_model *m;
	const char *url;
	bool full;
	uint64_t last_version;
	uint8_t *seen;         /* bitmap of versions listed, 0 … last_version (atomic ops) */
	atomic_uint next_key;
	atomic_bool dead;      /* kvd stopped answering: give up */
};

/* One check thread's state. */
struct chk {
	struct chk_run *run;
	struct cl_model *m;
	kvc *c;
	bool full;
	uint8_t *scratch;    /* CL_VALUE_MAX bytes */
	uint64_t last_version;
	uint64_t max_listed;
	uint64_t max_hist;   /* highest acknowledged (or applied) version present */
	uint64_t live_keys;
	struct listed *l;    /* the key at hand's listed versions, newest first */
	size_t nl, cl;
	struct orphan *orph; /* listed versions left to resolve() */
	size_t norph, corph;
	struct lost *lost;
	size_t nlost, clost;
	bool dead;           /* this thread saw kvd stop answering */
	pthread_t th;
};

static const char *how_name[CL_HOW_N] = {"Put", "conditional Put", "Delete",
                                         "conditional Delete", "Batch op"};

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 64;
	if ((p = realloc(p, *cap * size)) == NULL)
		abort();
	return p;
}

static int cmp_write(const void *a, const void *b)
{
	const struct cl_write *x = a, *y = b;

	return x->version < y->version ? -1 : x->version > y->version;
}

/* "put of 1234 bytes, Batch op 3 of client 2, round 7, acknowledged 3.1 ms
 * before the kill" */
static void describe(const struct cl_model *m, uint32_t key, const struct cl_write *w, char *buf,
                     size_t cap)
{
	char when[96] = "", op[16] = "";
	uint64_t kill = w->round <= m->round ? m->kills[w->round] : 0;

	if (w->how == CL_HOW_BATCH)
		snprintf(op, sizeof(op), " %u", w->op);
	if (kill != 0 && w->done_us <= kill)
		snprintf(when, sizeof(when), ", answered %.1f ms before that round's kill",
		         (double)(kill - w->done_us) / 1000.0);
	else if (kill != 0)
		snprintf(when, sizeof(when), ", answered %.1f ms after that round's kill",
		         (double)(w->done_us - kill) / 1000.0);
	if (w->kind == CL_PUT)
		snprintf(buf, cap,
		         "put of %u bytes (nonce %" PRIu64 ") by a %s%s of client %u in round %u%s",
		         cl_value_len(m->seed, key, w->nonce), w->nonce, how_name[w->how], op,
		         w->client, w->round, when);
	else
		snprintf(buf, cap, "delete by a %s%s of client %u in round %u%s", how_name[w->how], op,
		         w->client, w->round, when);
}

static void hexdump(const void *data, size_t len, char *buf, size_t cap)
{
	const uint8_t *p = data;
	size_t i, o = 0;

	buf[0] = '\0';
	for (i = 0; i < len && i < 16 && o + 3 < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%02x", p[i]);
	if (len > 16 && o + 4 < cap)
		snprintf(buf + o, cap - o, "…");
}

/* kvd stopped answering in the middle of the check. */
static bool gone(struct chk *c, int rv, const struct kvc_status *st, const char *what,
                 const struct cl_key *k)
{
	if (rv != -KVC_UNAVAILABLE && rv != -KVC_DEADLINE_EXCEEDED)
		return false;
	if (!atomic_exchange(&c->run->dead, true))
		cl_violation(c->m, k ? k->name : NULL, k ? k->len : 0,
		             "kvd stopped answering during the check (%s: %s %s)", what,
		             kvc_code_name(rv), st->message);
	c->dead = true;
	return true;
}

/* Does a listed put (data, len) hold exactly the value of write w? */
static bool same_value(struct chk *c, uint32_t key, const struct cl_write *w, const void *data,
                       size_t len, size_t *ret_diff)
{
	return cl_value_equal(c->m->seed, key, w->nonce, data, len, c->scratch, ret_diff);
}

static struct cl_write *hist_find(struct cl_key *k, uint64_t version)
{
	size_t lo = 0, hi = k->nhist;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->hist[mid].version < version)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->nhist && k->hist[lo].version == version ? &k->hist[lo] : NULL;
}

/* Explains an unknown listed put: whose content is it? */
static void explain_unknown(struct chk *c, uint32_t key, const struct cl_key *k,
                            const struct kvc_version *v)
{
	char hex[64], what[256] = "no write of this key ever had it";
	size_t i;

	hexdump(v->data, v->len, hex, sizeof(hex));
	for (i = 0; i < k->npend && !v->deleted; i++) {
		const struct cl_write *w = &k->pend[i];
		if (w->kind == CL_PUT && w->state == CL_REJECTED && same_value(c, key, w, v->data, v->len, NULL)) {
			char d[200];
			describe(c->m, key, w, d, sizeof(d));
			snprintf(what, sizeof(what), "it is the value of a write kvd refused: %s", d);
		}
	}
	for (i = 0; i < k->nhist && !v->deleted; i++) {
		const struct cl_write *w = &k->hist[i];
		if (w->kind == CL_PUT && w->version != v->version &&
		    same_value(c, key, w, v->data, v->len, NULL)) {
			snprintf(what, sizeof(what), "a second copy of version %" PRIu64, w->version);
			break;
		}
	}
	if (v->deleted)
		cl_violation(c->m, k->name, k->len,
		             "version %" PRIu64 " is a tombstone that no acknowledged or maybe "
		             "Delete of this round wrote",
		             v->version);
	else
		cl_violation(c->m, k->name, k->len,
		             "version %" PRIu64 " holds %zu bytes (%s) that no acknowledged or "
		             "maybe write put there: %s",
		             v->version, v->len, hex, what);
}

/* A listed version the model has no acknowledged write for: one of this
 * round's maybes of the key (resolve() picks which), or a violation. */
static void match_maybe(struct chk *c, uint32_t key, struct cl_key *k, const struct kvc_version *v)
{
	struct orphan o;
	size_t i;

	if (v->version <= c->m->version_floor) {
		cl_violation(c->m, k->name, k->len,
		             "version %" PRIu64 " (%s) appeared, older than this round (last "
		             "version at the last check %" PRIu64 ") and not seen then",
		             v->version, v->deleted ? "tombstone" : "put", c->m->version_floor);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.version = v->version;
	o.key = key;
	for (i = 0; i < k->npend && o.ncand < CHECK_CAND_MAX; i++) {
		const struct cl_write *w = &k->pend[i];
		if (w->state != CL_MAYBE)
			continue;
		if (v->deleted ? w->kind != CL_DEL
		               : w->kind != CL_PUT || !same_value(c, key, w, v->data, v->len, NULL))
			continue;
		o.cand[o.ncand++] = (uint32_t)i;
	}
	if (o.ncand == 0) {
		explain_unknown(c, key, k, v);
		return;
	}
	c->orph = grow(c->orph, &c->corph, c->norph, sizeof(*c->orph));
	c->orph[c->norph++] = o;
}

/* The orphan of key at version, if any (the key's own, recent ones). */
static const struct orphan *orphan_of(const struct chk *c, uint32_t key, uint64_t version)
{
	size_t i;

	for (i = c->norph; i > 0; i--) {
		if (c->orph[i - 1].key != key)
			break;
		if (c->orph[i - 1].version == version)
			return &c->orph[i - 1];
	}
	return NULL;
}

/* A listed version the model has: same kind, same value. */
static void check_listed(struct chk *c, uint32_t key, struct cl_key *k, struct cl_write *w,
                         const struct kvc_version *v)
{
	char d[256];
	size_t diff = 0;

	if (v->deleted != (w->kind == CL_DEL)) {
		describe(c->m, key, w, d, sizeof(d));
		cl_violation(c->m, k->name, k->len,
		             "version %" PRIu64 " is a %s, expected the acknowledged %s",
		             v->version, v->deleted ? "tombstone" : "put", d);
		return;
	}
	if (!v->deleted && !same_value(c, key, w, v->data, v->len, &diff)) {
		describe(c->m, key, w, d, sizeof(d));
		cl_violation(c->m, k->name, k->len,
		             "version %" PRIu64 " (Versions) holds %zu bytes differing from byte "
		             "%zu on, expected the acknowledged %s",
		             v->version, v->len, diff, d);
		return;
	}
	w->checked = 1;
}

static void mark_seen(struct chk *c, const struct cl_key *k, uint64_t version)
{
	if (version > c->max_listed)
		c->max_listed = version;
	if (version > c->last_version)
		return; /* reported with the Stats check */
	if (__atomic_fetch_or(&c->run->seen[version / 8], (uint8_t)(1u << (version % 8)),
	                      __ATOMIC_RELAXED) &
	    (1u << (version % 8)))
		cl_violation(c->m, k->name, k->len,
		             "version %" PRIu64 " is listed for this key and for another one",
		             version);
}

/* Reads the chain of key newest first with values, down to its floor (or
 * its end), and checks each entry as it comes. expect: the versions the
 * round may have added (the first page's size, so that a check reads about
 * what is new). Returns true when the whole chain was read. */
static bool walk_new(struct chk *c, uint32_t key, struct cl_key *k, size_t expect)
{
	uint64_t before = 0, prev = UINT64_MAX;
	uint32_t limit = expect + 2 < CHECK_PAGE ? (uint32_t)expect + 2 : CHECK_PAGE;
	bool complete = false;

	c->nl = 0;
	for (;;) {
		struct kvc_version *list = NULL;
		struct kvc_status st;
		struct kvc_call call = {.status = &st};
		bool truncated = false;
		size_t n = 0, i;
		int rv;

		rv = kvc_versions(c->c, &call, k->name, k->len, limit, before, true, &list, &n,
		                  &truncated);
		if (rv != 0) {
			if (!gone(c, rv, &st, "Versions", k))
				cl_violation(c->m, k->name, k->len, "Versions(before %" PRIu64 "): %s %s",
				             before, kvc_code_name(rv), st.message);
			return false;
		}
		if (truncated)
			cl_violation(c->m, k->name, k->len,
			             "Versions(before %" PRIu64 ") says older history was dropped, "
			             "with history kept in full (a record of the chain is missing)",
			             before);
		for (i = 0; i < n; i++) {
			struct kvc_version *v = &list[i];
			struct cl_write *w;
			if (v->version >= prev)
				cl_violation(c->m, k->name, k->len,
				             "Versions lists %" PRIu64 " after %" PRIu64
				             " (versions must fall)",
				             v->version, prev);
			prev = v->version;
			mark_seen(c, k, v->version);
			c->l = grow(c->l, &c->cl, c->nl, sizeof(*c->l));
			c->l[c->nl].version = v->version;
			c->l[c->nl++].deleted = v->deleted;
			if ((w = hist_find(k, v->version)) != NULL)
				check_listed(c, key, k, w, v);
			else
				match_maybe(c, key, k, v);
		}
		kvc_versions_free(list, n);
		if (n < limit || truncated) {
			complete = !truncated;
			break;
		}
		if (prev <= k->floor)
			break;
		before = prev;
		limit = limit * 2 < CHECK_PAGE ? limit * 2 : CHECK_PAGE;
	}
	return complete;
}

/* A full check: the whole chain, without values, against the whole model
 * of the key, but for this round's maybes (resolve() runs later). */
static void walk_all(struct chk *c, struct cl_key *k)
{
	uint64_t before = 0, prev = UINT64_MAX;
	size_t i, j;

	c->nl = 0;
	for (;;) {
		struct kvc_version *list = NULL;
		struct kvc_status st;
		struct kvc_call call = {.status = &st};
		bool truncated = false;
		size_t n = 0;
		int rv;

		rv = kvc_versions(c->c, &call, k->name, k->len, CHECK_PAGE_BARE, before, false,
		                  &list, &n, &truncated);
		if (rv != 0) {
			if (!gone(c, rv, &st, "Versions", k))
				cl_violation(c->m, k->name, k->len,
				             "Versions(before %" PRIu64 ", no values): %s %s", before,
				             kvc_code_name(rv), st.message);
			return;
		}
		if (truncated)
			cl_violation(c->m, k->name, k->len,
			             "Versions(before %" PRIu64 ", no values) says older history was "
			             "dropped, with history kept in full",
			             before);
		for (i = 0; i < n; i++) {
			if (list[i].version >= prev)
				cl_violation(c->m, k->name, k->len,
				             "Versions lists %" PRIu64 " after %" PRIu64
				             " (versions must fall)",
				             list[i].version, prev);
			prev = list[i].version;
			c->l = grow(c->l, &c->cl, c->nl, sizeof(*c->l));
			c->l[c->nl].version = list[i].version;
			c->l[c->nl++].deleted = list[i].deleted;
		}
		kvc_versions_free(list, n);
		if (n < CHECK_PAGE_BARE || truncated)
			break;
		before = prev;
	}
	/* both ways: hist ascending, l descending */
	for (i = 0, j = c->nl; i < k->nhist || j > 0;) {
		const struct cl_write *w = i < k->nhist ? &k->hist[i] : NULL;
		const struct listed *l = j > 0 ? &c->l[j - 1] : NULL;
		if (w != NULL && l != NULL && w->version == l->version) {
			if (l->deleted != (w->kind == CL_DEL))
				cl_violation(c->m, k->name, k->len,
				             "full check: version %" PRIu64 " is listed as a %s, it was "
				             "written as a %s",
				             w->version, l->deleted ? "tombstone" : "put",
				             w->kind == CL_DEL ? "delete" : "put");
			c->m->n.full_versions++;
			i++;
			j--;
		} else if (l == NULL || (w != NULL && w->version < l->version)) {
			cl_violation(c->m, k->name, k->len,
			             "full check: acknowledged version %" PRIu64 " (round %u) is not "
			             "in the chain any more",
			             w->version, w->round);
			c->lost = grow(c->lost, &c->clost, c->nlost, sizeof(*c->lost));
			c->lost[c->nlost].version = w->version;
			c->lost[c->nlost++].key = (uint32_t)(k - c->m->keys);
			i++;
		} else {
			/* this round's maybes are resolve()'s */
			if (l->version <= c->m->version_floor)
				cl_violation(c->m, k->name, k->len,
				             "full check: version %" PRIu64 " (%s) is in the chain, no "
				             "write the model knows",
				             l->version, l->deleted ? "tombstone" : "put");
			j--;
		}
	}
}

/* One exact-version Get of an acknowledged (or applied) write. */
static void exact_get(struct chk *c, uint32_t key, struct cl_key *k, struct cl_write *w)
{
	struct kvc_value val = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	char d[256];
	size_t diff = 0;
	int rv;

	rv = kvc_get(c->c, &call, k->name, k->len, w->version, 0, &val);
	c->m->n.checked_contents++;
	if (w->kind == CL_DEL) {
		if (rv != -KVC_NOT_FOUND && !gone(c, rv, &st, "Get", k)) {
			describe(c->m, key, w, d, sizeof(d));
			cl_violation(c->m, k->name, k->len,
			             "Get(version %" PRIu64 ") of a tombstone answered %s (%zu bytes), "
			             "expected NOT_FOUND for the acknowledged %s",
			             w->version, rv == 0 ? "OK" : kvc_code_name(rv), val.len, d);
		}
	} else if (rv != 0) {
		if (!gone(c, rv, &st, "Get", k)) {
			describe(c->m, key, w, d, sizeof(d));
			cl_violation(c->m, k->name, k->len,
			             "Get(version %" PRIu64 ") answered %s (%s), expected the "
			             "acknowledged %s",
			             w->version, kvc_code_name(rv), st.message, d);
		}
	} else if (val.version != w->version || !same_value(c, key, w, val.data, val.len, &diff)) {
		describe(c->m, key, w, d, sizeof(d));
		cl_violation(c->m, k->name, k->len,
		             "Get(version %" PRIu64 ") returned version %" PRIu64 ", %zu bytes "
		             "(first difference at byte %zu), expected the acknowledged %s",
		             w->version, val.version, val.len, diff, d);
	}
	w->checked = 1;
	kvc_value_free(&val);
}

/* Get(key) returns the newest listed version: w is the write listed there
 * (acknowledged, or a maybe with the same content), NULL when that is a
 * tombstone or nothing is listed. */
static void check_head(struct chk *c, uint32_t key, struct cl_key *k, uint64_t version,
                       const struct cl_write *w)
{
	struct kvc_value val = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	char d[256];
	size_t diff = 0;
	int rv;

	rv = kvc_get(c->c, &call, k->name, k->len, 0, 0, &val);
	c->m->n.checked_heads++;
	if (gone(c, rv, &st, "Get", k))
		goto out;
	if (w == NULL) {
		if (rv != -KVC_NOT_FOUND)
			cl_violation(c->m, k->name, k->len,
			             "Get answered %s (version %" PRIu64 ", %zu bytes), expected "
			             "NOT_FOUND: the newest version %" PRIu64 " is %s",
			             rv == 0 ? "OK" : kvc_code_name(rv), val.version, val.len, version,
			             version ? "a tombstone" : "none (never written)");
		goto out;
	}
	describe(c->m, key, w, d, sizeof(d));
	if (rv != 0)
		cl_violation(c->m, k->name, k->len,
		             "Get answered %s (%s), expected version %" PRIu64 ", the %s",
		             kvc_code_name(rv), st.message, version, d);
	else if (val.version != version || !same_value(c, key, w, val.data, val.len, &diff))
		cl_violation(c->m, k->name, k->len,
		             "Get returned version %" PRIu64 ", %zu bytes (first difference at "
		             "byte %zu), expected version %" PRIu64 ", the %s",
		             val.version, val.len, diff, version, d);
out:
	kvc_value_free(&val);
}

static void check_key(struct chk *c, uint32_t key)
{
	struct cl_model *m = c->m;
	struct cl_key *k = &m->keys[key];
	uint64_t cover;
	size_t i, j, first_new;
	bool complete;

	/* hist is sorted up to the writes of this round, which all lie above
	 * every older version: sort the tail */
	for (first_new = k->nhist; first_new > 0 && k->hist[first_new - 1].round == m->round;
	     first_new--)
		;
	if (k->nhist > first_new)
		qsort(k->hist + first_new, k->nhist - first_new, sizeof(*k->hist), cmp_write);
	for (i = first_new > 0 ? first_new : 1; i < k->nhist; i++)
		if (k->hist[i].version <= k->hist[i - 1].version)
			cl_violation(m, k->name, k->len,
			             "version %" PRIu64 " was acknowledged for two writes, or out of "
			             "order (after %" PRIu64 ")",
			             k->hist[i].version, k->hist[i - 1].version);

	complete = walk_new(c, key, k, k->nhist - first_new + k->npend);
	if (c->dead)
		return;
	/* the range read: everything when the chain was read to its end,
	 * otherwise down to its oldest listed version */
	cover = complete || c->nl == 0 ? 0 : c->l[c->nl - 1].version;

	/* every acknowledged version in the range is listed (l is newest first) */
	j = c->nl;
	for (i = 0; i < k->nhist; i++) {
		struct cl_write *w = &k->hist[i];
		if (w->version < cover)
			continue;
		while (j > 0 && c->l[j - 1].version < w->version)
			j--;
		if (j > 0 && c->l[j - 1].version == w->version) {
			if (w->version > c->max_hist)
				c->max_hist = w->version;
			if (w->round == m->round) {
				m->n.checked_acked++;
				if (w->done_us + NEAR_KILL_US >= m->kills[m->round])
					m->n.acked_near_kill++;
			}
			continue;
		}
		{
			char d[256];
			describe(m, key, w, d, sizeof(d));
			cl_violation(m, k->name, k->len,
			             "acknowledged version %" PRIu64 " is missing: expected the %s",
			             w->version, d);
		}
		c->lost = grow(c->lost, &c->clost, c->nlost, sizeof(*c->lost));
		c->lost[c->nlost].version = w->version;
		c->lost[c->nlost++].key = key;
	}

	/* the newest acknowledged write is the head, or later writes were
	 * listed above it */
	if (k->nhist > 0 && (c->nl == 0 || c->l[0].version < k->hist[k->nhist - 1].version))
		cl_violation(m, k->name, k->len,
		             "the newest acknowledged version %" PRIu64 " is above the newest "
		             "listed one %" PRIu64,
		             k->hist[k->nhist - 1].version, c->nl ? c->l[0].version : 0);
	if (c->nl > 0) {
		const struct cl_write *w = hist_find(k, c->l[0].version);
		const struct orphan *o = w ? NULL : orphan_of(c, key, c->l[0].version);
		if (o != NULL)
			w = &k->pend[o->cand[0]]; /* the candidates' contents are all alike */
		if (c->l[0].deleted)
			check_head(c, key, k, c->l[0].version, NULL);
		else if (w != NULL)
			check_head(c, key, k, c->l[0].version, w);
		k->head = c->l[0].version;
		k->exists = !c->l[0].deleted;
		k->floor = c->l[0].version;
		c->live_keys += k->exists;
	} else {
		check_head(c, key, k, 0, NULL);
	}
	/* this round's acknowledged writes, by exact version */
	for (i = first_new; i < k->nhist && !c->dead; i++)
		exact_get(c, key, k, &k->hist[i]);
	if (c->full && !c->dead)
		walk_all(c, k);
}

/* Exact Gets of random older acknowledged versions. */
static void sample(struct chk *c, uint64_t *rng)
{
	struct cl_model *m = c->m;
	uint32_t i, tries;

	for (i = 0, tries = 0; i < m->o->sample && tries < 4 * m->o->sample && !c->dead; tries++) {
		uint32_t key = (uint32_t)cl_below(rng, m->nkeys);
		struct cl_key *k = &m->keys[key];
		if (k->nhist == 0)
			continue;
		exact_get(c, key, k, &k->hist[cl_below(rng, k->nhist)]);
		m->n.sampled++;
		i++;
	}
}

/* ---- resolving the maybes ------------------------------------------------- */

static bool cand_free(const struct cl_model *m, const struct orphan *o, uint32_t i)
{
	return m->keys[o->key].pend[o->cand[i]].state == CL_MAYBE;
}

/* How well a maybe w fits listed version o: +2 when an op of its Batch was
 * found where this one would be next to it (the ops that write get
 * consecutive versions in op order; a delete may be a no-op, so the
 * distance is at most the ops'), -2 when ops of its Batch were found but
 * none such, -1 when its Batch has other puts not found yet, 0 otherwise. */
static int cand_score(const struct cl_model *m, const struct orphan *o, const struct cl_write *w)
{
	const struct cl_batch *b;
	bool found = false, near = false, puts = false;
	uint32_t j;

	if (w->batch == 0)
		return 0;
	b = &m->batches[w->batch - 1];
	for (j = 0; j < b->nops; j++) {
		int64_t dv, dop;
		if (j == w->op)
			continue;
		puts |= b->kinds[j] == CL_PUT;
		if (b->found[j] == 0)
			continue;
		found = true;
		dv = (int64_t)b->found[j] - (int64_t)o->version;
		dop = (int64_t)j - (int64_t)w->op;
		if ((dv > 0) == (dop > 0) && llabs(dv) <= llabs(dop))
			near = true;
	}
	return near ? 2 : found ? -2 : puts ? -1 : 0;
}

static void assign(struct cl_model *m, struct orphan *o, uint32_t i)
{
	struct cl_write *w = &m->keys[o->key].pend[o->cand[i]];

	w->version = o->version;
	w->state = CL_APPLIED;
	w->checked = 1;
	if (w->batch != 0)
		m->batches[w->batch - 1].found[w->op] = o->version;
	o->assigned = true;
	atomic_fetch_add(&m->n.maybe_applied, 1);
}

/* Assigns each orphan one maybe of its candidates, each maybe at most once;
 * then the applied maybes join hist and the rest are counted not applied. */
static void resolve(struct chk *c)
{
	struct cl_model *m = c->m;
	size_t i, left = c->norph;
	uint32_t key;

	while (left > 0) {
		struct orphan *best_o = NULL;
		uint32_t best_i = 0;
		int best = INT32_MIN;
		bool progress = false;

		/* forced: no candidate or one left */
		for (i = 0; i < c->norph; i++) {
			struct orphan *o = &c->orph[i];
			uint32_t j, nfree = 0, last = 0;
			if (o->assigned)
				continue;
			for (j = 0; j < o->ncand; j++)
				if (cand_free(m, o, j))
					nfree++, last = j;
			if (nfree == 1) {
				assign(m, o, last);
			} else if (nfree == 0) {
				const struct cl_key *k = &m->keys[o->key];
				const struct cl_write *w = &k->pend[o->cand[0]];
				cl_violation(m, k->name, k->len,
				             "version %" PRIu64 " holds the same %s as version %" PRIu64
				             " and no other maybe write of the round could have written "
				             "it: a write applied twice",
				             o->version, w->kind == CL_DEL ? "tombstone" : "value",
				             w->version);
				o->assigned = true;
			} else {
				continue;
			}
			left--;
			progress = true;
		}
		if (progress)
			continue;
		/* a choice: the best fitting candidate of all */
		for (i = 0; i < c->norph; i++) {
			struct orphan *o = &c->orph[i];
			uint32_t j;
			if (o->assigned)
				continue;
			for (j = 0; j < o->ncand; j++) {
				int sc;
				if (!cand_free(m, o, j))
					continue;
				sc = cand_score(m, o, &m->keys[o->key].pend[o->cand[j]]);
				if (sc > best)
					best = sc, best_o = o, best_i = j;
			}
		}
		assign(m, best_o, best_i);
		left--;
	}

	for (key = 0; key < m->nkeys; key++) {
		struct cl_key *k = &m->keys[key];
		size_t first_new = k->nhist, n = 0;
		for (i = 0; i < k->npend; i++) {
			if (k->pend[i].state == CL_APPLIED) {
				k->hist = grow(k->hist, &k->chist, k->nhist, sizeof(*k->hist));
				k->hist[k->nhist++] = k->pend[i];
				n++;
			} else if (k->pend[i].state == CL_MAYBE) {
				atomic_fetch_add(&m->n.maybe_lost, 1);
			}
		}
		k->npend = 0;
		if (n == 0)
			continue;
		while (first_new > 0 && k->hist[first_new - 1].round == m->round)
			first_new--;
		if (k->nhist > first_new)
		qsort(k->hist + first_new, k->nhist - first_new, sizeof(*k->hist), cmp_write);
	}
}

/* A maybe Batch is all or nothing. */
static void check_batches(struct chk *c)
{
	struct cl_model *m = c->m;
	size_t i;

	for (i = 0; i < m->nbatches; i++) {
		const struct cl_batch *b = &m->batches[i];
		uint32_t puts = 0, found = 0, j;
		uint64_t prev = 0;
		char ops[512];
		size_t o = 0;

		for (j = 0; j < b->nops; j++) {
			if (b->kinds[j] != CL_PUT)
				continue;
			puts++;
			if (b->found[j] != 0) {
				found++;
				if (b->found[j] <= prev) {
					const struct cl_key *k = &m->keys[b->keys[j]];
					cl_violation(m, k->name, k->len,
					             "maybe Batch of client %u: op %u found at version "
					             "%" PRIu64 ", not after the op before it (%" PRIu64 ")",
					             b->client, j, b->found[j], prev);
				}
				prev = b->found[j];
			}
			if (o + 64 < sizeof(ops))
				o += (size_t)snprintf(ops + o, sizeof(ops) - o, " op%u=%s%" PRIu64, j,
				                      b->found[j] ? "v" : "missing",
				                      b->found[j] ? b->found[j] : 0);
		}
		if (found > 0 && found < puts)
			cl_violation(m, NULL, 0,
			             "maybe Batch of client %u (%u ops, %u puts) applied in part: %u "
			             "puts present, %u missing:%s",
			             b->client, b->nops, puts, found, puts - found, ops);
		if (puts > 0 && found == puts)
			atomic_fetch_add(&m->n.maybe_batches_applied, 1);
	}
	m->nbatches = 0;
}

/* A lost write with a later acknowledged write present is a hole. */
static void check_holes(struct chk *c)
{
	size_t i;

	for (i = 0; i < c->nlost; i++) {
		const struct cl_key *k = &c->m->keys[c->lost[i].key];
		if (c->max_hist > c->lost[i].version)
			cl_violation(c->m, k->name, k->len,
			             "hole: acknowledged version %" PRIu64 " is missing while the "
			             "later acknowledged version %" PRIu64 " is present",
			             c->lost[i].version, c->max_hist);
	}
}

static void check_stats(struct chk *c, const struct kvc_tenant_info *ti)
{
	struct cl_model *m = c->m;

	if (ti->last_version < m->version_floor)
		cl_violation(m, NULL, 0,
		             "last_version went back from %" PRIu64 " to %" PRIu64 " across the "
		             "restart",
		             m->version_floor, ti->last_version);
	if (ti->last_version < c->max_hist || ti->last_version < m->max_acked)
		cl_violation(m, NULL, 0,
		             "last_version %" PRIu64 " is below the highest acknowledged version "
		             "%" PRIu64,
		             ti->last_version, c->max_hist > m->max_acked ? c->max_hist : m->max_acked);
	if (c->max_listed > ti->last_version)
		cl_violation(m, NULL, 0,
		             "version %" PRIu64 " is listed, above last_version %" PRIu64
		             " (the next write would reuse it)",
		             c->max_listed, ti->last_version);
	if (ti->keys != c->live_keys)
		cl_violation(m, NULL, 0,
		             "Stats counts %" PRIu64 " keys, the versions read say %" PRIu64
		             " keys exist",
		             ti->keys, c->live_keys);
}

static void chk_fini(struct chk *c)
{
	free(c->scratch);
	free(c->l);
	free(c->orph);
	free(c->lost);
	kvc_close(c->c);
}

static int chk_init(struct chk *c, struct chk_run *run)
{
	struct kvc_options ko;
	int rv;

	memset(c, 0, sizeof(*c));
	c->run = run;
	c->m = run->m;
	c->full = run->full;
	c->last_version = run->last_version;
	kvc_options_init(&ko);
	ko.endpoint = run->url;
	ko.timeout_ms = CHECK_TIMEOUT_MS;
	if ((rv = kvc_open(&ko, &c->c)) != 0)
		return rv;
	if ((c->scratch = malloc(CL_VALUE_MAX)) == NULL)
		abort();
	return 0;
}

static void *chk_main(void *arg)
{
	struct chk *c = arg;
	uint32_t key;

	while (!atomic_load(&c->run->dead) &&
	       (key = atomic_fetch_add(&c->run->next_key, 1)) < c->m->nkeys)
		check_key(c, key);
	return NULL;
}

int cl_check(struct cl_model *m, const char *url, bool full)
{
	struct chk_run run;
	struct chk cs[CHECK_THREADS_MAX];
	struct kvc_tenant_info ti;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	uint64_t rng = cl_mix(m->seed ^ 0x636865636bULL) ^ cl_mix(m->round);
	uint32_t nt = m->o->check_threads, i;
	struct chk *c = &cs[0];
	int rv;

	memset(&run, 0, sizeof(run));
	run.m = m;
	run.url = url;
	run.full = full;
	atomic_init(&run.next_key, 0);
	atomic_init(&run.dead, false);
	if (nt == 0 || nt > CHECK_THREADS_MAX)
		nt = nt == 0 ? 1 : CHECK_THREADS_MAX;
	if ((rv = chk_init(c, &run)) != 0) {
		cl_violation(m, NULL, 0, "cannot connect to the restarted kvd: %s",
		             kvc_code_name(rv));
		return -1;
	}
	if ((rv = kvc_stats(c->c, &call, &ti)) != 0) {
		cl_violation(m, NULL, 0, "Stats after the restart: %s %s", kvc_code_name(rv),
		             st.message);
		chk_fini(c);
		return -1;
	}
	run.last_version = c->last_version = ti.last_version;
	if ((run.seen = calloc(ti.last_version / 8 + 1, 1)) == NULL)
		abort();
	for (i = 1; i < nt; i++) {
		if (chk_init(&cs[i], &run) != 0 ||
		    pthread_create(&cs[i].th, NULL, chk_main, &cs[i]) != 0) {
			chk_fini(&cs[i]);
			break;
		}
	}
	nt = i;
	chk_main(c);
	for (i = 1; i < nt; i++) {
		pthread_join(cs[i].th, NULL);
		if (cs[i].max_hist > c->max_hist)
			c->max_hist = cs[i].max_hist;
		if (cs[i].max_listed > c->max_listed)
			c->max_listed = cs[i].max_listed;
		c->live_keys += cs[i].live_keys;
		while (c->clost < c->nlost + cs[i].nlost)
			c->lost = grow(c->lost, &c->clost, c->clost, sizeof(*c->lost));
		if (cs[i].nlost)
			memcpy(c->lost + c->nlost, cs[i].lost, cs[i].nlost * sizeof(*c->lost));
		c->nlost += cs[i].nlost;
		while (c->corph < c->norph + cs[i].norph)
			c->orph = grow(c->orph, &c->corph, c->corph, sizeof(*c->orph));
		if (cs[i].norph)
			memcpy(c->orph + c->norph, cs[i].orph, cs[i].norph * sizeof(*c->orph));
		c->norph += cs[i].norph;
		chk_fini(&cs[i]);
	}
	if (!atomic_load(&run.dead))
		sample(c, &rng);
	if (!atomic_load(&run.dead)) {
		resolve(c);
		check_batches(c);
		check_holes(c);
		c->live_keys += cl_blobs_live(m, url); /* Stats counts the blob keys too */
		check_stats(c, &ti);
	}
	if (full && !atomic_load(&run.dead))
		m->n.full_checks++;
	if (c->max_hist > m->max_acked)
		m->max_acked = c->max_hist;
	m->version_floor = ti.last_version;
	m->nbatches = 0;
	free(run.seen);
	chk_fini(c);
	return atomic_load(&run.dead) ? -1 : 0;
}
