/*
 * model.c — the crash loop's log of every write the clients attempted.
 *
 * What it owns: per key, the acknowledged writes (and the maybe writes a
 * check found applied, which count as acknowledged from then on), and the
 * current round's maybe and rejected writes; the round's maybe batches; the
 * counters; the violation count.
 *
 * Invariants:
 *  1. A write is in exactly one list of its key: hist (ACKED, APPLIED) or
 *     pend (MAYBE, REJECTED). cl_check moves each MAYBE to hist or drops it,
 *     and drops the REJECTED ones, so pend is empty when a round starts.
 *  2. Every version in hist is unique within the key and was answered by
 *     kvd (or found by a check); hist is sorted by version after a check.
 *  3. head/exists only ever move forward during a round (the newest answer
 *     wins); a check resets them to what kvd holds.
 *
 * Threads: writers call cl_record, cl_record_batch and cl_key_head during a
 * round (key->mu, batch_mu); cl_violation may come from any thread
 * (viol_mu); everything else is the main thread's, between rounds.
 */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t cl_now_us(const struct cl_model *m)
{
	return mono_us() - m->t0_us;
}

uint64_t cl_nonce(struct cl_model *m)
{
	return atomic_fetch_add(&m->next_nonce, 1);
}

int cl_model_init(struct cl_model *m, const struct cl_opts *o)
{
	uint32_t i;

	memset(m, 0, sizeof(*m));
	m->o = o;
	m->seed = o->seed;
	m->nkeys = o->keys;
	m->t0_us = mono_us();
	atomic_init(&m->next_nonce, 1);
	pthread_mutex_init(&m->batch_mu, NULL);
	pthread_mutex_init(&m->viol_mu, NULL);
	if ((m->keys = calloc(o->keys, sizeof(*m->keys))) == NULL)
		return -1;
	for (i = 0; i < o->keys; i++) {
		pthread_mutex_init(&m->keys[i].mu, NULL);
		if ((m->keys[i].name = cl_key_name(o->seed, i, &m->keys[i].len)) == NULL)
			return -1;
	}
	return 0;
}

void cl_model_fini(struct cl_model *m)
{
	uint32_t i;

	if (m->keys != NULL) {
		for (i = 0; i < m->nkeys; i++) {
			free(m->keys[i].name);
			free(m->keys[i].hist);
			free(m->keys[i].pend);
			pthread_mutex_destroy(&m->keys[i].mu);
		}
	}
	free(m->keys);
	free(m->batches);
	pthread_mutex_destroy(&m->batch_mu);
	pthread_mutex_destroy(&m->viol_mu);
}

static void push(struct cl_write **v, size_t *n, size_t *cap, const struct cl_write *w)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct cl_write *p = realloc(*v, nc * sizeof(*p));
		if (p == NULL)
			abort(); /* the model is the test: without it there is nothing to check */
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = *w;
}

void cl_record(struct cl_model *m, uint32_t key, const struct cl_write *w)
{
	struct cl_key *k = &m->keys[key];

	pthread_mutex_lock(&k->mu);
	if (w->state == CL_ACKED) {
		push(&k->hist, &k->nhist, &k->chist, w);
		if (w->version > k->head) {
			k->head = w->version;
			k->exists = w->kind == CL_PUT;
		}
	} else {
		push(&k->pend, &k->npend, &k->cpend, w);
	}
	pthread_mutex_unlock(&k->mu);
}

uint32_t cl_record_batch(struct cl_model *m, const struct cl_batch *b)
{
	uint32_t id;

	pthread_mutex_lock(&m->batch_mu);
	if (m->nbatches == m->cbatches) {
		size_t nc = m->cbatches ? m->cbatches * 2 : 16;
		struct cl_batch *p = realloc(m->batches, nc * sizeof(*p));
		if (p == NULL)
			abort();
		m->batches = p;
		m->cbatches = nc;
	}
	m->batches[m->nbatches] = *b;
	memset(m->batches[m->nbatches].found, 0, sizeof(b->found));
	id = (uint32_t)++m->nbatches;
	pthread_mutex_unlock(&m->batch_mu);
	return id;
}

void cl_key_head(struct cl_model *m, uint32_t key, uint64_t *ret_head, bool *ret_exists)
{
	struct cl_key *k = &m->keys[key];

	pthread_mutex_lock(&k->mu);
	*ret_head = k->head;
	*ret_exists = k->exists;
	pthread_mutex_unlock(&k->mu);
}

void cl_violation(struct cl_model *m, const char *key, size_t key_len, const char *fmt, ...)
{
	char kt[128];
	va_list ap;

	pthread_mutex_lock(&m->viol_mu);
	if (++m->violations <= CL_REPORT_MAX) {
		if (key != NULL)
			cl_key_text(key, key_len, kt, sizeof(kt));
		fprintf(stderr, "VIOLATION (seed %llu, iteration %u, dir %s)%s%s: ",
		        (unsigned long long)m->seed, m->round, m->dir ? m->dir : "?",
		        key ? " key " : "", key ? kt : "");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	} else if (m->violations == CL_REPORT_MAX + 1) {
		fprintf(stderr, "(further violations are counted, not printed)\n");
	}
	pthread_mutex_unlock(&m->viol_mu);
}

void cl_note(const struct cl_model *m, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "crashloop (seed %llu, iteration %u): ", (unsigned long long)m->seed,
	        m->round);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
