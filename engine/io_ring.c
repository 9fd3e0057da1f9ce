/*
 * io_ring.c — reads through a ring of each reading thread's own (io_uring),
 * falling back to pread where a thread cannot have one.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* ---- reads through a per-thread ring -------------------------------------- */

#define READ_RING_ENTRIES 64

struct read_ring {
	struct io_uring ring;
	int state; /* 0: not tried, 1: ready, -1: cannot be set up */
};

static __thread struct read_ring tl_ring;
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

static void ring_free(void *p)
{
	struct read_ring *r = p;

	if (r->state == 1)
		io_uring_queue_exit(&r->ring);
	r->state = 0;
}

/* A child of fork() must not touch its parent's ring (the rings are shared
 * memory): it starts over with a ring of its own. */
static void ring_after_fork(void)
{
	tl_ring.state = 0;
}

static void ring_key_init(void)
{
	pthread_key_create(&ring_key, ring_free);
	pthread_atfork(NULL, NULL, ring_after_fork);
}

static struct io_uring *thread_ring(void)
{
	if (tl_ring.state == 0) {
		pthread_once(&ring_once, ring_key_init);
		if (io_uring_queue_init(READ_RING_ENTRIES, &tl_ring.ring, 0) == 0) {
			io_uring_ring_dontfork(&tl_ring.ring);
			tl_ring.state = 1;
			pthread_setspecific(ring_key, &tl_ring);
		} else {
			tl_ring.state = -1;
		}
	}
	return tl_ring.state == 1 ? &tl_ring.ring : NULL;
}

/* Submits up to READ_RING_ENTRIES reads and reaps them; short reads are
 * finished with pread. */
static int ring_reads(struct io_uring *ring, struct io_rd *v, size_t n)
{
	size_t i, done = 0;
	int rv, first = 0;

	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		io_uring_prep_read(sqe, v[i].fd, v[i].buf, (unsigned)v[i].len, v[i].off);
		io_uring_sqe_set_data64(sqe, i);
		v[i].res = 1; /* pending */
	}
	if ((rv = io_uring_submit_and_wait(ring, (unsigned)n)) < 0) {
		/* nothing went out: read them the plain way */
		for (i = 0; i < n; i++)
			v[i].res = 1;
		done = 0;
		goto plain;
	}
	while (done < n) {
		struct io_uring_cqe *cqe;
		if ((rv = io_uring_wait_cqe(ring, &cqe)) < 0) {
			if (rv == -EINTR)
				continue;
			return rv; /* the ring is broken; pending reads are lost */
		}
		i = (size_t)io_uring_cqe_get_data64(cqe);
		if (cqe->res < 0)
			v[i].res = cqe->res;
		else if ((size_t)cqe->res < v[i].len)
			v[i].res = io_pread_full(NULL, v[i].fd, (uint8_t *)v[i].buf + cqe->res,
			                         v[i].len - (size_t)cqe->res,
			                         v[i].off + (uint64_t)cqe->res);
		else
			v[i].res = 0;
		io_uring_cqe_seen(ring, cqe);
		done++;
	}
plain:
	for (i = 0; i < n; i++) {
		if (v[i].res == 1)
			v[i].res = io_pread_full(NULL, v[i].fd, v[i].buf, v[i].len, v[i].off);
		if (v[i].res != 0 && first == 0)
			first = v[i].res;
	}
	return first;
}

int io_read_batch(struct kv_io_fault *f, bool uring, struct io_rd *v, size_t n)
{
	struct io_uring *ring = uring ? thread_ring() : NULL;
	size_t i;
	int first = 0, rv;

	if (f != NULL && f->on_read != NULL) {
		for (i = 0; i < n; i++) {
			if ((rv = f->on_read(f->arg, v[i].fd, v[i].off, v[i].len)) < 0) {
				v[i].res = rv;
				if (first == 0)
					first = rv;
			} else {
				v[i].res = 0;
			}
		}
		if (first != 0)
			return first;
	}
	if (ring == NULL || n == 0) {
		for (i = 0; i < n; i++) {
			v[i].res = io_pread_full(NULL, v[i].fd, v[i].buf, v[i].len, v[i].off);
			if (v[i].res != 0 && first == 0)
				first = v[i].res;
		}
		return first;
	}
	for (i = 0; i < n; i += READ_RING_ENTRIES) {
		size_t m = n - i < READ_RING_ENTRIES ? n - i : READ_RING_ENTRIES;
		rv = ring_reads(ring, v + i, m);
		if (rv != 0 && first == 0)
			first = rv;
	}
	return first;
}

int io_read(struct kv_io_fault *f, bool uring, int fd, void *buf, size_t len, uint64_t off)
{
	struct io_rd r = {fd, buf, len, off, 0};

	if (!uring)
		return io_pread_full(f, fd, buf, len, off);
	return io_read_batch(f, uring, &r, 1);
}
