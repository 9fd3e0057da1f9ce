/*
 * writer.c — the crash loop's client threads: each opens its own kvc handle
 * for the round and writes until the round is stopped, recording every
 * outcome in the model.
 *
 * The mix (per client, from its own PRNG stream of the seed):
 *   35%  Put
 *   20%  conditional Put: if_version = the newest version the model knows
 *        (0, "must not exist", when that is a delete); one in ten on purpose
 *        one below it, which kvd must refuse
 *   15%  Delete, half of them conditional on the newest known version
 *   30%  Batch of 2 … 8 operations on distinct keys: puts (a quarter
 *        conditional) and deletes
 *
 * Outcomes: OK is an acknowledged write (its version recorded);
 * FAILED_PRECONDITION and NOT_FOUND (Delete of a missing key) are definite
 * refusals; UNAVAILABLE, DEADLINE_EXCEEDED and CANCELLED mean the write may or
 * may not have been applied ("maybe"). Any other status is a violation (and
 * the write is a maybe, since nothing is known of it).
 *
 * The handle is closed before the thread ends, so no request of this round
 * can reach the kvd of the next one (kvc_close waits for calls in flight).
 */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct writer {
	struct cl_round *r;
	struct cl_model *m;
	kvc *c;
	uint32_t id;
	uint64_t rng;
	uint8_t *vals[CL_BATCH_MAX]; /* value buffers, CL_VALUE_MAX each */
	uint64_t ops;
};

static struct writer writers[CL_CLIENTS_MAX];

enum outcome { OUT_ACKED, OUT_REJECTED, OUT_MAYBE };

/* What a status says about whether the write was applied. */
static enum outcome classify(struct writer *w, int rv, const struct kvc_status *st,
                             bool may_not_find, const char *what, uint32_t key)
{
	const struct cl_key *k = &w->m->keys[key];

	if (rv == 0)
		return OUT_ACKED;
	if (rv == -KVC_FAILED_PRECONDITION || (may_not_find && rv == -KVC_NOT_FOUND)) {
		atomic_fetch_add(&w->m->n.rejected, 1);
		return OUT_REJECTED;
	}
	if (rv == -KVC_UNAVAILABLE || rv == -KVC_DEADLINE_EXCEEDED || rv == -KVC_CANCELLED) {
		/* kvd is only killed after stop is set: a running kvd that
		 * fails a write is a finding, and so is one that leaves a write
		 * unanswered for the whole call timeout (10 s, far longer than a
		 * round): it hung */
		if (!atomic_load(&w->r->stop))
			cl_violation(w->m, k->name, k->len,
			             "client %u: %s failed while kvd was running: %s (%s)", w->id,
			             what, kvc_code_name(rv), st->message);
		return OUT_MAYBE;
	}
	atomic_fetch_add(&w->m->n.errors, 1);
	cl_violation(w->m, k->name, k->len, "client %u: %s answered %s: %s", w->id, what,
	             kvc_code_name(rv), st->message);
	return OUT_MAYBE;
}

/* A version kvd gave must be above every version that existed when this
 * round's kvd started (versions are never reused across restarts). */
static void check_fresh(struct writer *w, uint32_t key, uint64_t version, const char *what)
{
	const struct cl_key *k = &w->m->keys[key];

	if (version <= w->m->version_floor)
		cl_violation(w->m, k->name, k->len,
		             "%s acknowledged with version %llu, not above last_version %llu "
		             "read after the restart (a version reused)",
		             what, (unsigned long long)version,
		             (unsigned long long)w->m->version_floor);
}

static void record(struct writer *w, uint32_t key, enum outcome out, uint8_t kind, uint8_t how,
                   uint64_t version, uint64_t nonce, uint32_t batch, uint8_t op)
{
	struct cl_write x;

	memset(&x, 0, sizeof(x));
	x.version = out == OUT_ACKED ? version : 0;
	x.nonce = nonce;
	x.done_us = cl_now_us(w->m);
	x.round = w->r->round;
	x.batch = batch;
	x.kind = kind;
	x.how = how;
	x.client = (uint8_t)w->id;
	x.op = op;
	x.state = out == OUT_ACKED ? CL_ACKED : out == OUT_MAYBE ? CL_MAYBE : CL_REJECTED;
	if (out == OUT_ACKED) {
		atomic_fetch_add(&w->m->n.acked[how], 1);
		if (kind == CL_PUT)
			atomic_fetch_add(&w->m->n.bytes,
			                 cl_value_len(w->m->seed, key, nonce));
	} else if (out == OUT_MAYBE) {
		atomic_fetch_add(&w->m->n.maybe, 1);
	}
	cl_record(w->m, key, &x);
}

static uint32_t pick_key(struct writer *w)
{
	return (uint32_t)cl_below(&w->rng, w->m->nkeys);
}

/* A value for (key, nonce) in buffer i. */
static uint32_t make_value(struct writer *w, uint32_t key, uint64_t nonce, int i)
{
	uint32_t len = cl_value_len(w->m->seed, key, nonce);

	cl_value_fill(w->m->seed, key, nonce, w->vals[i], len);
	return len;
}

static void do_put(struct writer *w, bool cond)
{
	struct kvc_write wr = KVC_WRITE_INIT;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	uint32_t key = pick_key(w);
	const struct cl_key *k = &w->m->keys[key];
	uint64_t nonce = cl_nonce(w->m), version = 0;
	uint32_t len = make_value(w, key, nonce, 0);
	enum outcome out;
	int rv;

	wr.ttl_ms = KVC_TTL_NONE;
	if (cond) {
		uint64_t head;
		bool exists;
		cl_key_head(w->m, key, &head, &exists);
		wr.if_version = exists ? head : 0;
		if (cl_below(&w->rng, 10) == 0)
			wr.if_version = exists ? head - 1 : head + 1; /* stale on purpose */
	}
	rv = kvc_put(w->c, &call, k->name, k->len, w->vals[0], len, &wr, &version);
	out = classify(w, rv, &st, false, cond ? "conditional Put" : "Put", key);
	if (out == OUT_ACKED)
		check_fresh(w, key, version, "Put");
	record(w, key, out, CL_PUT, cond ? CL_HOW_CPUT : CL_HOW_PUT, version, nonce, 0, 0);
}

static void do_delete(struct writer *w, bool cond)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	uint32_t key = pick_key(w);
	const struct cl_key *k = &w->m->keys[key];
	uint64_t if_version = KVC_ANY_VERSION, version = 0;
	enum outcome out;
	int rv;

	if (cond) {
		bool exists;
		cl_key_head(w->m, key, &if_version, &exists);
	}
	rv = kvc_delete(w->c, &call, k->name, k->len, if_version, &version);
	out = classify(w, rv, &st, true, cond ? "conditional Delete" : "Delete", key);
	if (out == OUT_ACKED)
		check_fresh(w, key, version, "Delete");
	record(w, key, out, CL_DEL, cond ? CL_HOW_CDEL : CL_HOW_DEL, version, 0, 0, 0);
}

static void do_batch(struct writer *w)
{
	struct kvc_op ops[CL_BATCH_MAX];
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct cl_batch b;
	uint64_t nonces[CL_BATCH_MAX];
	uint32_t n = 2 + (uint32_t)cl_below(&w->rng, CL_BATCH_MAX - 1), i, j, id = 0;
	uint64_t prev = 0;
	size_t failed = SIZE_MAX;
	enum outcome out;
	int rv;

	if (n > w->m->nkeys)
		n = w->m->nkeys;
	memset(&b, 0, sizeof(b));
	memset(ops, 0, sizeof(ops));
	for (i = 0; i < n; i++) {
		uint32_t key;
	again:
		key = pick_key(w);
		for (j = 0; j < i; j++)
			if (b.keys[j] == key)
				goto again;
		b.keys[i] = key;
		ops[i].key = w->m->keys[key].name;
		ops[i].key_len = w->m->keys[key].len;
		ops[i].if_version = KVC_ANY_VERSION;
		ops[i].ttl_ms = KVC_TTL_NONE;
		nonces[i] = 0;
		if (cl_below(&w->rng, 10) < 7) {
			b.kinds[i] = CL_PUT;
			ops[i].type = KVC_OP_PUT;
			nonces[i] = cl_nonce(w->m);
			ops[i].value = w->vals[i];
			ops[i].value_len = make_value(w, key, nonces[i], (int)i);
			if (cl_below(&w->rng, 4) == 0) {
				uint64_t head;
				bool exists;
				cl_key_head(w->m, key, &head, &exists);
				ops[i].if_version = exists ? head : 0;
			}
		} else {
			b.kinds[i] = CL_DEL;
			ops[i].type = KVC_OP_DELETE;
		}
	}
	b.nops = (uint8_t)n;
	b.round = w->r->round;
	b.client = (uint8_t)w->id;
	rv = kvc_batch(w->c, &call, ops, n, &failed);
	out = classify(w, rv, &st, false, "Batch", b.keys[0]);
	if (out == OUT_MAYBE) {
		id = cl_record_batch(w->m, &b);
		atomic_fetch_add(&w->m->n.maybe_batches, 1);
	}
	for (i = 0; i < n; i++) {
		if (out == OUT_ACKED && ops[i].version == 0) {
			/* a delete of a missing key: a no-op, nothing written */
			if (ops[i].type != KVC_OP_DELETE)
				cl_violation(w->m, ops[i].key, ops[i].key_len,
				             "Batch op %u (put) acknowledged with version 0", i);
			atomic_fetch_add(&w->m->n.batch_noops, 1);
			continue;
		}
		if (out == OUT_ACKED) {
			check_fresh(w, b.keys[i], ops[i].version, "Batch op");
			/* the ops that write get consecutive versions */
			if (prev != 0 && ops[i].version != prev + 1)
				cl_violation(w->m, ops[i].key, ops[i].key_len,
				             "Batch op %u acknowledged with version %llu after %llu "
				             "(not consecutive)",
				             i, (unsigned long long)ops[i].version,
				             (unsigned long long)prev);
			prev = ops[i].version;
		}
		record(w, b.keys[i], out, b.kinds[i], CL_HOW_BATCH, ops[i].version, nonces[i], id,
		       (uint8_t)i);
	}
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct kvc_options ko;
	int rv;

	kvc_options_init(&ko);
	ko.endpoint = w->r->url;
	ko.timeout_ms = w->m->o->timeout_ms;
	ko.contexts = 4;
	if ((rv = kvc_open(&ko, &w->c)) != 0) {
		cl_note(w->m, "client %u: kvc_open: %s", w->id, kvc_code_name(rv));
		return NULL;
	}
	while (!atomic_load(&w->r->stop)) {
		uint64_t p = cl_below(&w->rng, 100);
		if (p < 35)
			do_put(w, false);
		else if (p < 55)
			do_put(w, true);
		else if (p < 70)
			do_delete(w, cl_below(&w->rng, 2) == 0);
		else
			do_batch(w);
		w->ops++;
	}
	kvc_close(w->c);
	w->c = NULL;
	return NULL;
}

int cl_writers_start(struct cl_round *r, uint32_t n, pthread_t *ret_threads)
{
	uint32_t i, j;

	for (i = 0; i < n; i++) {
		struct writer *w = &writers[i];
		w->r = r;
		w->m = r->m;
		w->id = i;
		w->rng = cl_mix(r->m->seed ^ 0x777269746572ULL) ^
		         cl_mix(((uint64_t)r->round << 8) | i);
		w->ops = 0;
		for (j = 0; j < CL_BATCH_MAX; j++)
			if (w->vals[j] == NULL && (w->vals[j] = malloc(CL_VALUE_MAX)) == NULL)
				goto fail;
		if (pthread_create(&ret_threads[i], NULL, writer_main, w) != 0)
			goto fail;
	}
	return 0;
fail:
	atomic_store(&r->stop, true);
	cl_writers_join(ret_threads, i);
	return -1;
}

void cl_writers_join(pthread_t *threads, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
}

void cl_writers_free(void)
{
	uint32_t i, j;

	for (i = 0; i < CL_CLIENTS_MAX; i++)
		for (j = 0; j < CL_BATCH_MAX; j++) {
			free(writers[i].vals[j]);
			writers[i].vals[j] = NULL;
		}
}
