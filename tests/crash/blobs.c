/*
 * blobs.c — the crash loop's blob uploads: one more client per round
 * uploads blobs to keys of their own ("blob00" …) while the writers run, so
 * kvd is killed in the middle of uploads and of commits too.
 *
 * Each upload: 8 bytes … CL_BLOB_MAX bytes in appends of CL_BLOB_APPEND
 * bytes, 4 KiB chunks (so most blobs have many chunks and several
 * appends). A blob's bytes are a function of its nonce, which its first 8
 * bytes hold, so whatever version the check finds tells which upload it
 * came from. One upload in four is abandoned (closed without a commit).
 *
 * Outcomes: a commit answered OK is acknowledged (its version recorded); a
 * commit without an answer (kvd killed) is a maybe; an upload that failed
 * before its commit, or was abandoned, must leave nothing.
 *
 * The check after each restart, per blob key:
 *   - the newest version is at or above every acknowledged commit of the
 *     key, and is a blob one of this key's uploads committed (acknowledged
 *     or maybe), whole and byte-exact (its size, its bytes, BlobInfo's
 *     XXH64) — never an abandoned or interrupted upload's;
 *   - every commit acknowledged in the round just ended reads back
 *     byte-exact at its version.
 * Threads: the uploader thread records under blob_mu; the check runs when
 * it has been joined.
 */
#include "crash.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define CL_BLOB_KEYS   8
#define CL_BLOB_MAX    (256u << 10)
#define CL_BLOB_APPEND (16u << 10)
#define CL_BLOB_CHUNK  4096u

enum { BL_ACKED = 1, BL_MAYBE = 2 };

struct bl_rec {
	uint64_t nonce;
	uint64_t version; /* acked: its version; maybe: 0 until found */
	uint32_t size;
	uint32_t round;
	uint8_t state;
};

static struct {
	pthread_mutex_t mu;
	struct bl_rec *recs[CL_BLOB_KEYS];
	size_t n[CL_BLOB_KEYS], cap[CL_BLOB_KEYS];
	uint64_t committed, maybe, maybe_applied, abandoned, interrupted, checked, bytes;
	uint8_t *buf, *back;
	pthread_t thread;
	bool running;
} bl = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void bl_key(uint32_t i, char *buf, size_t cap)
{
	snprintf(buf, cap, "blob%02u", i);
}

/* The bytes of the blob of nonce, size bytes: its nonce first. */
static void bl_fill(uint64_t nonce, uint8_t *buf, uint32_t size)
{
	uint64_t st = cl_mix(nonce ^ 0x626c6f62ULL);

	for (uint32_t i = 0; i < size; i += 8) {
		uint64_t x = i == 0 ? nonce : cl_rand(&st);
		memcpy(buf + i, &x, size - i < 8 ? size - i : 8);
	}
}

static void bl_record(uint32_t key, const struct bl_rec *r)
{
	pthread_mutex_lock(&bl.mu);
	if (bl.n[key] == bl.cap[key]) {
		size_t cap = bl.cap[key] ? bl.cap[key] * 2 : 16;
		struct bl_rec *nv = realloc(bl.recs[key], cap * sizeof(*nv));
		if (nv == NULL)
			abort();
		bl.recs[key] = nv;
		bl.cap[key] = cap;
	}
	bl.recs[key][bl.n[key]++] = *r;
	pthread_mutex_unlock(&bl.mu);
}

static bool bl_unanswered(int rv)
{
	return rv == -KVC_UNAVAILABLE || rv == -KVC_DEADLINE_EXCEEDED || rv == -KVC_CANCELLED;
}

/* One upload; false when the round is over (kvd killed or stopping). */
static bool bl_upload(struct cl_round *r, kvc *c, uint64_t *rng)
{
	struct cl_model *m = r->m;
	struct kvc_blob_opts bo = KVC_BLOB_OPTS_INIT;
	struct kvc_call call = {0};
	kvc_blob_writer *w = NULL;
	uint32_t key = (uint32_t)cl_below(rng, CL_BLOB_KEYS);
	uint32_t size = 8 + (uint32_t)cl_below(rng, CL_BLOB_MAX - 7);
	bool abandon = cl_below(rng, 4) == 0;
	struct bl_rec rec = {.nonce = cl_nonce(m), .size = size, .round = r->round};
	char name[16];
	uint64_t version = 0;
	int rv;

	bl_key(key, name, sizeof(name));
	bo.chunk_size = CL_BLOB_CHUNK;
	bo.append_size = CL_BLOB_APPEND;
	bl_fill(rec.nonce, bl.buf, size);
	if ((rv = kvc_blob_writer_open(c, &call, name, strlen(name), &bo, &w)) != 0)
		goto failed;
	for (uint32_t off = 0; off < size; off += CL_BLOB_APPEND) {
		uint32_t n = size - off < CL_BLOB_APPEND ? size - off : CL_BLOB_APPEND;
		if ((rv = kvc_blob_write(w, bl.buf + off, n)) != 0)
			goto failed;
	}
	if (abandon || atomic_load(&r->stop)) {
		kvc_blob_writer_close(w);
		pthread_mutex_lock(&bl.mu);
		bl.abandoned++;
		pthread_mutex_unlock(&bl.mu);
		return !atomic_load(&r->stop);
	}
	rv = kvc_blob_commit(w, &version);
	kvc_blob_writer_close(w);
	if (rv == 0) {
		rec.state = BL_ACKED;
		rec.version = version;
		bl_record(key, &rec);
		pthread_mutex_lock(&bl.mu);
		bl.committed++;
		bl.bytes += size;
		pthread_mutex_unlock(&bl.mu);
		return true;
	}
	if (bl_unanswered(rv)) {
		rec.state = BL_MAYBE;
		bl_record(key, &rec);
		pthread_mutex_lock(&bl.mu);
		bl.maybe++;
		pthread_mutex_unlock(&bl.mu);
		return false;
	}
	cl_violation(m, name, strlen(name), "BlobCommit of %u bytes: %s", size, kvc_code_name(rv));
	return false;
failed:
	kvc_blob_writer_close(w);
	if (!bl_unanswered(rv) && rv != -KVC_NOT_FOUND)
		cl_violation(m, name, strlen(name), "blob upload of %u bytes: %s", size,
		             kvc_code_name(rv));
	pthread_mutex_lock(&bl.mu);
	bl.interrupted++;
	pthread_mutex_unlock(&bl.mu);
	return false;
}

static void *bl_main(void *arg)
{
	struct cl_round *r = arg;
	struct kvc_options ko;
	uint64_t rng = cl_mix(r->m->seed ^ 0x75706cULL ^ r->round);
	kvc *c = NULL;

	kvc_options_init(&ko);
	ko.endpoint = r->url;
	ko.timeout_ms = r->m->o->timeout_ms;
	if (kvc_open(&ko, &c) != 0) {
		cl_note(r->m, "blob uploads: no client handle this round");
		return NULL;
	}
	while (!atomic_load(&r->stop) && bl_upload(r, c, &rng))
		;
	kvc_close(c);
	return NULL;
}

int cl_blobs_start(struct cl_round *r)
{
	if (bl.buf == NULL &&
	    ((bl.buf = malloc(CL_BLOB_MAX)) == NULL || (bl.back = malloc(CL_BLOB_MAX)) == NULL))
		return -1;
	if (pthread_create(&bl.thread, NULL, bl_main, r) != 0)
		return -1;
	bl.running = true;
	return 0;
}

void cl_blobs_join(void)
{
	if (bl.running)
		pthread_join(bl.thread, NULL);
	bl.running = false;
}

/* The blob of key at version (0: the newest) read whole: its info and
 * bytes in bl.back. 0, or the call's error. */
static int bl_read(kvc *c, const char *name, uint64_t version, struct kvc_blob_info *info)
{
	struct kvc_call call = {0};
	size_t n = 0;
	int rv;

	if ((rv = kvc_blob_info(c, &call, name, strlen(name), version, info)) != 0)
		return rv;
	if (info->size > CL_BLOB_MAX)
		return -KVC_OUT_OF_RANGE;
	if ((rv = kvc_blob_read(c, &call, name, strlen(name), info->version, 0, bl.back,
	                        info->size, &n)) != 0)
		return rv;
	return n == info->size ? 0 : -KVC_DATA_LOSS;
}

/* Whether bl.back holds the blob of r, whole. */
static bool bl_matches(const struct bl_rec *r, const struct kvc_blob_info *info)
{
	if (info->size != r->size)
		return false;
	bl_fill(r->nonce, bl.buf, r->size);
	return memcmp(bl.buf, bl.back, r->size) == 0 && XXH64(bl.back, r->size, 0) == info->xxh64;
}

static void bl_check_key(struct cl_model *m, kvc *c, uint32_t key)
{
	struct kvc_blob_info info;
	struct bl_rec *recs = bl.recs[key], *head = NULL;
	uint64_t newest_acked = 0, nonce = 0;
	char name[16];
	size_t i;
	int rv;

	bl_key(key, name, sizeof(name));
	for (i = 0; i < bl.n[key]; i++)
		if (recs[i].state == BL_ACKED && recs[i].version > newest_acked)
			newest_acked = recs[i].version;
	rv = bl_read(c, name, 0, &info);
	if (rv == -KVC_NOT_FOUND) {
		if (newest_acked != 0)
			cl_violation(m, name, strlen(name),
			             "no blob, though version %" PRIu64 " was acknowledged",
			             newest_acked);
		return;
	}
	if (rv != 0) {
		cl_violation(m, name, strlen(name), "reading the newest blob: %s", kvc_code_name(rv));
		return;
	}
	if (info.version < newest_acked)
		cl_violation(m, name, strlen(name),
		             "newest version %" PRIu64 " is older than the acknowledged %" PRIu64,
		             info.version, newest_acked);
	if (info.size >= 8)
		memcpy(&nonce, bl.back, 8);
	for (i = 0; i < bl.n[key]; i++)
		if (recs[i].nonce == nonce)
			head = &recs[i];
	if (head == NULL || !bl_matches(head, &info) ||
	    (head->state == BL_ACKED && head->version != info.version)) {
		cl_violation(m, name, strlen(name),
		             "newest version %" PRIu64 " (%" PRIu64
		             " bytes) is no blob this key's uploads committed",
		             info.version, info.size);
		return;
	}
	if (head->state == BL_MAYBE) {
		head->state = BL_ACKED;
		head->version = info.version;
		bl.maybe_applied++;
	}
	bl.checked++;
	/* this round's acknowledged commits, each at its version */
	for (i = 0; i < bl.n[key]; i++) {
		if (recs[i].state != BL_ACKED || recs[i].round != m->round)
			continue;
		if ((rv = bl_read(c, name, recs[i].version, &info)) != 0 ||
		    !bl_matches(&recs[i], &info))
			cl_violation(m, name, strlen(name),
			             "acknowledged blob version %" PRIu64 " does not read back: %s",
			             recs[i].version, rv ? kvc_code_name(rv) : "other bytes");
		else
			bl.checked++;
	}
	/* a maybe commit not found now never shows up later: forget it */
	for (i = 0; i < bl.n[key];)
		if (recs[i].state == BL_MAYBE)
			recs[i] = recs[--bl.n[key]];
		else
			i++;
}

void cl_blobs_check(struct cl_model *m, const char *url)
{
	struct kvc_options ko;
	kvc *c = NULL;

	kvc_options_init(&ko);
	ko.endpoint = url;
	if (kvc_open(&ko, &c) != 0) {
		cl_violation(m, NULL, 0, "blob check: no client handle");
		return;
	}
	for (uint32_t key = 0; key < CL_BLOB_KEYS; key++)
		bl_check_key(m, c, key);
	kvc_close(c);
}

uint64_t cl_blobs_live(struct cl_model *m, const char *url)
{
	struct kvc_options ko;
	struct kvc_blob_info info;
	uint64_t n = 0;
	kvc *c = NULL;

	kvc_options_init(&ko);
	ko.endpoint = url;
	if (kvc_open(&ko, &c) != 0) {
		cl_note(m, "blob keys: no client handle");
		return 0;
	}
	for (uint32_t key = 0; key < CL_BLOB_KEYS; key++) {
		struct kvc_call call = {0};
		char name[16];
		bl_key(key, name, sizeof(name));
		n += kvc_blob_info(c, &call, name, strlen(name), 0, &info) == 0;
	}
	kvc_close(c);
	return n;
}

void cl_blobs_report(void)
{
	printf("  blob uploads               %" PRIu64 " committed (%.1f MiB), %" PRIu64
	       " abandoned, %" PRIu64 " cut by the kill, %" PRIu64 " commits unanswered (%" PRIu64
	       " found applied); %" PRIu64 " blob versions read back whole\n",
	       bl.committed, (double)bl.bytes / 1048576.0, bl.abandoned, bl.interrupted, bl.maybe,
	       bl.maybe_applied, bl.checked);
}

void cl_blobs_free(void)
{
	for (uint32_t k = 0; k < CL_BLOB_KEYS; k++)
		free(bl.recs[k]);
	free(bl.buf);
	free(bl.back);
}
