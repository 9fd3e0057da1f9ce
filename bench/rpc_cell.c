/*
 * bench/rpc_cell.c — kvbench rpc's cell runner: a cell's client threads
 * started behind one gate, its warm-up and its measurement window (at least
 * --seconds, and until a call has completed in it), and their figures
 * merged into the cell. rpc.c's kvd cells and rpc_baseline.c's baselines
 * run through it.
 */
#include "rpc_bench.h"

#include "bench.h"
#include "hist.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- cells of client threads ------------------------------------------------ */

int rb_gate(struct rb_run *r)
{
	int go;

	pthread_mutex_lock(&r->mu);
	r->ready++;
	pthread_cond_broadcast(&r->cv);
	while (r->go == 0)
		pthread_cond_wait(&r->cv, &r->mu);
	go = r->go;
	pthread_mutex_unlock(&r->mu);
	return go;
}

static void *rb_thread_main(void *arg)
{
	struct rb_thread *t = arg;
	struct rb_run *r = t->run;
	int go;

	if (r->k->setup != NULL && r->k->setup(t) != 0)
		t->setup_failed = true;
	go = rb_gate(r);
	if (!t->setup_failed && go > 0) {
		for (;;) {
			int ph = atomic_load(&r->phase), rv;
			uint64_t t0, t1;
			if (ph == PH_STOP)
				break;
			t0 = bench_now_ns();
			rv = r->k->op(t);
			t1 = bench_now_ns();
			if (rv < 0) {
				if (++t->errors >= RB_ERRORS_MAX)
					break;
				continue;
			}
			if (rv > 0)
				t->wrong++;
			if (ph == PH_MEASURE && atomic_load(&r->phase) == PH_MEASURE) {
				hist_add(&t->h, t1 - t0);
				t->ops++;
				atomic_fetch_add_explicit(&r->measured, 1, memory_order_relaxed);
			}
		}
	}
	if (r->k->teardown != NULL)
		r->k->teardown(t);
	return NULL;
}

/* Runs one cell: nthreads threads of kind r->k through warm-up and
 * measurement; fills c. */
void rb_run_cell(struct rb_bench *b, struct rb_run *r, struct rb_cell *c)
{
	struct rb_thread *th = calloc(r->nthreads, sizeof(*th));
	struct hist *h = calloc(1, sizeof(*h));
	unsigned started = 0;
	uint64_t ops = 0;
	double t0, t1;

	r->b = b;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->ready = 0;
	r->go = 0;
	atomic_init(&r->phase, PH_WARMUP);
	atomic_init(&r->measured, 0);
	if (th == NULL || h == NULL) {
		bench_fmt(c->err, sizeof c->err, "out of memory");
		goto out;
	}
	for (started = 0; started < r->nthreads; started++) {
		struct rb_thread *t = &th[started];
		t->run = r;
		t->idx = started;
		t->fd = -1;
		t->rng = 0x9e3779b97f4a7c15ull * (started + 1) ^ ((uint64_t)b->ncells << 32);
		t->vpos = ((size_t)started * 4099u * 64u) % RB_POOL_BYTES;
		if (pthread_create(&t->tid, NULL,
		                   r->k->thread_main ? r->k->thread_main : rb_thread_main, t) != 0)
			break;
	}
	pthread_mutex_lock(&r->mu);
	while (r->ready < started)
		pthread_cond_wait(&r->cv, &r->mu);
	r->go = started == r->nthreads ? 1 : -1;
	for (unsigned i = 0; i < started; i++)
		if (th[i].setup_failed)
			r->go = -1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->go > 0) {
		bench_sleep(b->o.warmup);
		atomic_store(&r->phase, PH_MEASURE);
		t0 = bench_now();
		bench_sleep(b->o.seconds);
		/* a cell reports at least one call: on a loaded machine one call
		 * (an fdatasync) can outlast a short window, which then goes on
		 * until a call has completed in it (RB_CELL_MAX_S at most) */
		while (atomic_load(&r->measured) == 0 && bench_now() - t0 < RB_CELL_MAX_S)
			bench_sleep(0.01);
		atomic_store(&r->phase, PH_STOP);
		t1 = bench_now();
	} else {
		atomic_store(&r->phase, PH_STOP);
		t0 = t1 = 0;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	if (started < r->nthreads) {
		bench_fmt(c->err, sizeof c->err, "pthread_create failed after %u threads", started);
		goto out;
	}
	for (unsigned i = 0; i < r->nthreads; i++) {
		hist_merge(h, &th[i].h);
		ops += th[i].ops;
		c->errors += th[i].errors;
		c->wrong += th[i].wrong;
		if (c->err[0] == '\0' && th[i].err[0] != '\0')
			bench_fmt(c->err, sizeof c->err, "%s", th[i].err);
		if (th[i].setup_failed && c->err[0] == '\0')
			bench_fmt(c->err, sizeof c->err, "thread setup failed");
	}
	if (r->go > 0) {
		c->state = CELL_OK;
		rb_cell_fill(c, h, ops, t1 - t0);
		if (c->errors + c->wrong > 0 && c->err[0] == '\0')
			bench_fmt(c->err, sizeof c->err, "%" PRIu64 " wrong results", c->wrong);
	}
out:
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(th);
	free(h);
	rb_row_text(b->progress, c);
}
